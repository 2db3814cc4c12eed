// Double-precision reference attention for the kernel tests (test_flash, test_kernels):
// materialises the softmax, so it is independent of the blockwise algorithm.
#ifndef LC_ATTN_REF_H
#define LC_ATTN_REF_H

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/flash/flash.h"

static inline int visible(const lc_attn_shape *s, int i, int j) {
  return (!s->causal || s->k_start + j <= s->q_start + i) && (!s->lo || s->k_start + j >= s->lo[i]);
}

// Reference forward in double: out[Tq,Hq,D], lse[Hq,Tq] (-inf for rows with no key).
static inline void ref_fwd(double *out, double *lse, const float *q, const float *k, const float *v,
                    const lc_attn_shape *s) {
  int Tq = s->Tq, Tk = s->Tk, Hq = s->Hq, Hkv = s->Hkv, D = s->D, grp = Hq / Hkv;
  double *sc = malloc(sizeof(double) * (size_t)(Tk ? Tk : 1));
  for (int h = 0; h < Hq; h++) {
    int g = h / grp;
    for (int i = 0; i < Tq; i++) {
      double m = -INFINITY;
      for (int j = 0; j < Tk; j++) {
        if (!visible(s, i, j)) continue;
        double d = 0;
        for (int e = 0; e < D; e++)
          d += (double)q[((long)i * Hq + h) * D + e] * k[((long)j * Hkv + g) * D + e];
        sc[j] = d * s->scale;
        if (sc[j] > m) m = sc[j];
      }
      double *o = out + ((long)i * Hq + h) * D;
      for (int e = 0; e < D; e++) o[e] = 0;
      if (m == -INFINITY) {
        lse[(long)h * Tq + i] = -INFINITY;
        continue;
      }
      double sum = 0;
      for (int j = 0; j < Tk; j++)
        if (visible(s, i, j)) sum += exp(sc[j] - m);
      double L = m + log(sum);
      lse[(long)h * Tq + i] = L;
      for (int j = 0; j < Tk; j++) {
        if (!visible(s, i, j)) continue;
        double p = exp(sc[j] - L);
        for (int e = 0; e < D; e++) o[e] += p * v[((long)j * Hkv + g) * D + e];
      }
    }
  }
  free(sc);
}

// Reference backward in double with the materialised P (from its own exact lse). mag = 0:
// dq, dk, dv (overwritten). mag = 1 (dv unused): the magnitudes dq and dk sum, |dS| |k| and
// |dS| |q| with |dS| = P (|dP| + sum_j P |dP|) scale: a bf16 kernel's rounding of P and dP
// errs by about 2^-8 of these, the floor an error check needs where dq or dk cancel to ~0
// (one visible key: dS = 0 analytically).
static inline void ref_bwd_any(double *dq, double *dk, double *dv, const float *dout, const float *q, const float *k,
                               const float *v, const lc_attn_shape *s, int mag) {
  int Tq = s->Tq, Tk = s->Tk, Hq = s->Hq, Hkv = s->Hkv, D = s->D, grp = Hq / Hkv;
  memset(dq, 0, sizeof(double) * (size_t)Tq * Hq * D);
  memset(dk, 0, sizeof(double) * (size_t)Tk * Hkv * D);
  if (!mag) memset(dv, 0, sizeof(double) * (size_t)Tk * Hkv * D);
  double *P = malloc(sizeof(double) * (size_t)(Tk ? Tk : 1));
  double *dP = malloc(sizeof(double) * (size_t)(Tk ? Tk : 1));
  for (int h = 0; h < Hq; h++) {
    int g = h / grp;
    for (int i = 0; i < Tq; i++) {
      const float *qi = q + ((long)i * Hq + h) * D, *doi = dout + ((long)i * Hq + h) * D;
      double m = -INFINITY;
      for (int j = 0; j < Tk; j++) {
        P[j] = -INFINITY;
        if (!visible(s, i, j)) continue;
        double d = 0;
        for (int e = 0; e < D; e++) d += (double)qi[e] * k[((long)j * Hkv + g) * D + e];
        P[j] = d * s->scale;
        if (P[j] > m) m = P[j];
      }
      if (m == -INFINITY) continue;
      double sum = 0;
      for (int j = 0; j < Tk; j++) sum += visible(s, i, j) ? exp(P[j] - m) : 0;
      double L = m + log(sum), delta = 0;
      for (int j = 0; j < Tk; j++) {
        P[j] = visible(s, i, j) ? exp(P[j] - L) : 0;
        double d = 0;
        for (int e = 0; e < D; e++) d += (double)doi[e] * v[((long)j * Hkv + g) * D + e];
        dP[j] = mag ? fabs(d) : d;
        delta += P[j] * dP[j];
      }
      for (int j = 0; j < Tk; j++) {
        if (P[j] == 0) continue;
        double dS = P[j] * (mag ? dP[j] + delta : dP[j] - delta) * s->scale;
        for (int e = 0; e < D; e++) {
          long kj = ((long)j * Hkv + g) * D + e;
          dq[((long)i * Hq + h) * D + e] += dS * (mag ? fabs(k[kj]) : k[kj]);
          dk[kj] += dS * (mag ? fabs(qi[e]) : qi[e]);
          if (!mag) dv[kj] += P[j] * doi[e];
        }
      }
    }
  }
  free(P);
  free(dP);
}
static inline void ref_bwd(double *dq, double *dk, double *dv, const float *dout, const float *q, const float *k,
                           const float *v, const lc_attn_shape *s) {
  ref_bwd_any(dq, dk, dv, dout, q, k, v, s, 0);
}
static inline void ref_bwd_mag(double *mdq, double *mdk, const float *dout, const float *q, const float *k,
                               const float *v, const lc_attn_shape *s) {
  ref_bwd_any(mdq, mdk, NULL, dout, q, k, v, s, 1);
}

#endif
