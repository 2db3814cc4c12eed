// The CPU emulation of CUDA (cuda_emu.h) as seen from C: its findings and the scheduling order.
#ifndef LC_CUDA_EMU_C_H
#define LC_CUDA_EMU_C_H

#ifdef __cplusplus
extern "C" {
#endif

// Findings since the last reset: shared-memory races, reads of unwritten or out-of-bounds
// shared memory, deadlocks, invalid launches (each also printed on stderr and returned as the
// launch's error).
long lcc_emu_findings(void);
void lcc_emu_reset_findings(void);
// The order in which a block's threads run between synchronisations: 0 ascending thread
// index, 1 descending (a race shows in the values under one of them).
void lcc_emu_set_order(int descending);

#ifdef __cplusplus
}
#endif

#endif
