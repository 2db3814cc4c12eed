// lc_comm_agree (comm.h): one status for all ranks, with the failing rank's message.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm/comm.h"

lc_status lc_comm_agree(lc_comm *c, lc_status st) {
  if (c->size == 1) return st;
  int mine = (int)st, *all = calloc((size_t)c->size, sizeof(int));
  if (!all) return lc_fail(LC_ENOMEM, "out of memory agreeing on a status");
  lc_status cs = lc_allgather(c, &mine, all, 1, LC_DT_I32);
  int k = -1;
  for (int r = 0; cs == LC_OK && r < c->size && k < 0; r++)
    if (all[r] != LC_OK) k = r;
  const lc_status code = k >= 0 ? (lc_status)all[k] : LC_OK;
  free(all);
  if (cs != LC_OK || k < 0) return cs;
  char msg[1024];
  snprintf(msg, sizeof msg, "%s", c->rank == k ? lc_errmsg() : "");
  LC_TRY(lc_bcast(c, msg, sizeof msg, LC_DT_U8, k));
  msg[sizeof msg - 1] = 0;
  return k == 0 ? lc_fail(code, "%s", msg) : lc_fail(code, "rank %d: %s", k, msg);
}
