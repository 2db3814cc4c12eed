// The fp32 GEMM every fp32 product goes through (backend/cpu/gemm/matmul.c): OpenBLAS's sgemm, or
// oneDNN's fp32 matmul for the shapes where a measurement found it faster.
//
// Which library wins depends on the exact shape (on a Zen 3: oneDNN 1-3% faster on most of
// SmolLM2's products and 20% on its LM head's dW, OpenBLAS 14% faster on the head's forward
// tile), so the choice is
// per exact shape (kind, M, N, K): `train --calibrate-from-run` records the shapes its steps
// run, times both libraries on each and stores their rates in the machine file; a run with
// that file uses the faster library for each recorded shape and OpenBLAS for any other.
// Nothing is timed inside a run to choose: two runs with the same machine file compute the
// same bits.
#ifndef LC_SGEMM_H
#define LC_SGEMM_H

#include <stddef.h>

#include "core/status.h"

enum { LC_SGEMM_OPENBLAS = 0, LC_SGEMM_ONEDNN = 1 };
#define LC_SGEMM_SHAPES 128 // shapes a choice or a recording holds

typedef struct {
  int ta, tb, M, N, K;
  double gflops[2]; // measured rate of each library (0: not measured)
  long calls;       // calls while recording (0 in a machine file's table)
} lc_sgemm_shape;

typedef struct {
  int n;
  lc_sgemm_shape s[LC_SGEMM_SHAPES];
} lc_sgemm_table;

// Row-major C[M,N] = beta C + op(A) op(B), alpha 1 (op: transposed when ta / tb), beta 0
// or 1: through the installed choice.
void lc_sgemm(int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B, long ldb, float beta,
              float *C, long ldc);
// The same through one library.
void lc_sgemm_with(int lib, int ta, int tb, int M, int N, int K, const float *A, long lda, const float *B, long ldb,
                   float beta, float *C, long ldc);
// The library lc_sgemm uses for a call of this shape: oneDNN where the installed table
// measured it at least 2% faster, else OpenBLAS.
int lc_sgemm_lib_for(int ta, int tb, int M, int N, int K);
// Installs a table for every following call (NULL or empty: OpenBLAS everywhere).
void lc_sgemm_set_choice(const lc_sgemm_table *t);
const char *lc_sgemm_lib_name(int lib);
// One line on what the installed table does, for the settings table (why OpenBLAS, when
// nothing was measured).
const char *lc_sgemm_describe(char *buf, size_t n);
// Recording: while on, every distinct shape lc_sgemm is called with goes into the
// recording (up to LC_SGEMM_SHAPES); lc_sgemm_recorded copies it out (rates 0).
void lc_sgemm_record(int on);
void lc_sgemm_recorded(lc_sgemm_table *out);
// Times both libraries on each shape of t (best of `reps` calls each, alternating, on
// operands of its size) and fills their rates. LC_ENOMEM with one line when the operands
// cannot be allocated.
lc_status lc_sgemm_measure(lc_sgemm_table *t, int reps);
// Of a measured recording: the seconds its calls take with the faster library of each shape
// over their seconds with OpenBLAS alone (<= 1; 1 when nothing was recorded).
double lc_sgemm_gain(const lc_sgemm_table *t);

#endif
