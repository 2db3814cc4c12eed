// `longctx calibrate`: measures the rates of plan/rates.h on this machine for the process
// grid it runs in (every rank computes at once, so shared caches and memory bandwidth are
// contended as in training; the network terms between the world's ranks). Rank 0's
// numbers are the profile.
#ifndef LC_CALIBRATE_H
#define LC_CALIBRATE_H

#include "comm/comm.h"
#include "plan/rates.h"

// progress (may be NULL): called on rank 0 with a short description of the next step and
// the fraction done.
lc_status lc_calibrate(lc_comm *world, int threads, lc_rates *out, void (*progress)(const char *what, double frac));

#endif
