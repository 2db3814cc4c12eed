#pragma once
// Floating-point environment for training runs.
//
// Flush subnormal floats to zero (FTZ) and treat subnormal inputs as zero (DAZ) on this
// thread and on every OpenMP thread. Without it a training run slows down as it learns:
// the probabilities of tokens the model has learnt never to predict fall below 1e-38,
// and every GEMM and element-wise op that touches them pays a microcode assist per
// subnormal operand (measured: the demo preset fell from 3.4K to 0.46K tokens/s over 250
// steps). Values that small are below any gradient that matters in float32 training.
// Threads created later by these threads inherit the setting. lc_trainer_init calls it,
// so every training run (the program, bench, tests, a library user) gets it.
void lc_fpenv_flush_denormals(void);
