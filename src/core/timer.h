#ifndef LC_TIMER_H
#define LC_TIMER_H
// Monotonic wall-clock seconds.
double lc_now(void);
#endif
