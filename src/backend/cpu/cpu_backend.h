// The CPU backend: buffers in the run's arena (host memory), ops through the kernel table
// (backend/cpu/kern/kernels.h), every call synchronous.
#ifndef LC_CPU_BACKEND_H
#define LC_CPU_BACKEND_H

#include "backend/backend.h"

// A CPU backend over `arena`, allocated (lc_backend_close frees it).
lc_status lc_backend_cpu_open(lc_arena *arena, lc_backend **out);

// Its table: the private test backend runs these on the addresses it resolves.
const lc_backend_ops *lc_backend_cpu_ops(void);

#endif
