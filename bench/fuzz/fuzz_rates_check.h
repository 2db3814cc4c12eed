// The properties every rate table the machine-file and hardware-file readers accept must
// have (shared by fuzz_machine and fuzz_hardware): every compute rate and bandwidth finite
// and positive, latencies finite and not negative, and the time model's prices of a few
// ops finite and positive.
#ifndef LC_FUZZ_RATES_CHECK_H
#define LC_FUZZ_RATES_CHECK_H

#include <math.h>

#include "fuzz_util.h"
#include "plan/rates.h"

static inline int lc_fuzz_pos(double x) { return isfinite(x) && x > 0; }
static inline int lc_fuzz_nonneg(double x) { return isfinite(x) && x >= 0; }

static inline void lc_fuzz_check_rates(const lc_rates *r) {
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++) {
      for (int k = 0; k < LC_RATE_NDIM; k++)
        for (int n = 0; n < LC_RATE_NDIM; n++)
          if (!lc_fuzz_pos(r->gemm[b][d][k][n])) LC_FUZZ_TRAP();
      for (int h = 0; h < LC_RATE_NHD; h++)
        if (!lc_fuzz_pos(r->flash[b][d][h])) LC_FUZZ_TRAP();
      for (int i = 0; i < LC_RATE_NROWS; i++)
        if (!lc_fuzz_nonneg(r->gemm_rows[b][d][i])) LC_FUZZ_TRAP();
      for (int i = 0; i < LC_RATE_NLEN; i++)
        if (!lc_fuzz_nonneg(r->flash_len[b][d][i])) LC_FUZZ_TRAP();
    }
  if (!lc_fuzz_pos(r->ew_bw) || !lc_fuzz_nonneg(r->optim_bw) || !lc_fuzz_nonneg(r->loss_bw) || !lc_fuzz_nonneg(r->disk_bw) ||
      !lc_fuzz_nonneg(r->host_link_bw) || !lc_fuzz_nonneg(r->host_optim_bw) || !lc_fuzz_nonneg(r->mem_bytes) ||
      r->devices_per_node < 0 || !r->source[0])
    LC_FUZZ_TRAP();
  for (int c = 0; c < LC_COLL_N; c++)
    if (!lc_fuzz_pos(r->coll[c].bw) || !lc_fuzz_nonneg(r->coll[c].lat_s)) LC_FUZZ_TRAP();
  if (!lc_fuzz_nonneg(r->inter.bw) || !lc_fuzz_nonneg(r->inter.lat_s)) LC_FUZZ_TRAP();
  for (int b = 0; b < 2; b++)
    for (int d = 0; d < 2; d++)
      if (!lc_fuzz_pos(lc_rates_gemm_s(r, b, d, 100, 300, 5000)) || !lc_fuzz_pos(lc_rates_flash_s(r, b, d, 96, 3000, 1e9)))
        LC_FUZZ_TRAP();
  if (!lc_fuzz_pos(lc_rates_ew_s(r, 1e6)) || !lc_fuzz_pos(lc_rates_optim_s(r, 1e6)) || !lc_fuzz_pos(lc_rates_loss_s(r, 1e6)) ||
      !lc_fuzz_pos(lc_rates_coll_s(r, LC_COLL_ALLREDUCE, 4, 1e6, 0)) || !lc_fuzz_pos(lc_rates_host_copy_s(r, 1e6)) ||
      !lc_fuzz_pos(lc_rates_host_optim_s(r, 1e6)))
    LC_FUZZ_TRAP();
  char buf[256];
  if (!lc_rates_provenance(r, buf, sizeof buf)[0]) LC_FUZZ_TRAP();
}

#endif
