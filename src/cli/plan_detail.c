// plan --peak-detail: the memory model's named buffers at the total peak (lc_mem_estimate's
// detail), largest first, with their bytes per local token; the sum is the total printed above.
#include <stdio.h>
#include <stdlib.h>

#include "cli/cli.h"

static int by_bytes_desc(const void *a, const void *b) {
  const lc_mem_part *x = a, *y = b;
  return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

void lc_plan_print_peak_detail(const lc_mem_estimate *e) {
  lc_mem_parts d = e->detail;
  qsort(d.p, (size_t)d.n, sizeof d.p[0], by_bytes_desc);
  char b[32];
  size_t sum = 0;
  printf("\nbuffers live at the total peak (%s), largest first\n", lc_mem_phase_name(e->total_phase));
  printf("| buffer | category | held | per rank | bytes per local token |\n|---|---|---|---|---|\n");
  for (int i = 0; i < d.n; i++) {
    const lc_mem_part *p = &d.p[i];
    sum += p->bytes;
    printf("| %s | %s | %s | %s | %.0f |\n", p->name, p->cat >= 0 ? lc_mem_cat_name((lc_mem_cat)p->cat) : "gathered + grads",
           p->held ? p->held : "", lc_fmt_bytes(b, (int)sizeof b, (double)p->bytes), (double)p->bytes / (double)e->T);
  }
  printf("| sum | | | %s | %.0f |\n", lc_fmt_bytes(b, (int)sizeof b, (double)sum), (double)sum / (double)e->T);
  if (sum != e->total) // the parts are the total's own terms: a difference is a bug in the model
    printf("warning: the buffers sum to %zu bytes, the total peak is %zu\n", sum, e->total);
}
