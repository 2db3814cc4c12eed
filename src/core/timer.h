#ifndef LC_TIMER_H
#define LC_TIMER_H
// Monotonic wall-clock seconds.
double lc_now(void);
// Sleeps this thread for `seconds` (>= 0).
void lc_sleep(double seconds);
#endif
