// The parameter store's gradient reductions: small state machines (group collective, then
// across replica groups) progressed by polling and retired in order; a unit's gradient begin/end.
#include <stdlib.h>
#include <string.h>

#include "core/runstate.h"
#include "model/pstore_internal.h"

lc_comm *lc_ps_red_comm(const lc_pstore *ps, const lc_ps_red *r) {
  if (ps->stage == 0) return ps->world;
  return r->phase == 0 ? ps->zg : ps->rep;
}

// Reduction r is complete: staged views written back (the result) and freed.
static lc_status red_finish(lc_pstore *ps, lc_ps_red *r) {
  r->done = 1;
  const lc_status a = lc_buf_hview_close(&r->hv_in, 0), b = lc_buf_hview_close(&r->hv_out, 1);
  r->piece = NULL;
  return a != LC_OK ? a : b;
}

// Reduction r's phase 0 has completed: its result into place; done unless the replica
// groups still have to be summed (phase 1, started by start_phase1 in FIFO order).
static lc_status phase0_done(lc_pstore *ps, lc_ps_red *r) {
  const int u = r->unit;
  if (u < 0) { // a row range (stage >= 2): its piece is in place
    if (ps->R == 1) return red_finish(ps, r);
    r->p0_done = 1;
    return LC_OK;
  }
  const size_t s = lc_ps_shard_floats(ps, u);
  if (ps->stage == 1 && ps->zrank != 0) {
    // The in-place reduce-scatter left the result at the unit's start: move it to its slice.
    float *G = r->hv_out.host;
    memmove(G + (size_t)ps->zrank * s, G, lc_bytes(LC_DT_F32, s));
  }
  if (ps->stage == 0 || ps->R == 1) return red_finish(ps, r);
  r->p0_done = 1;
  return LC_OK;
}

static lc_status start_phase1(lc_pstore *ps, lc_ps_red *r) {
  const int u = r->unit;
  if (u < 0) {
    r->p0_done = 0;
    r->phase = 1;
    return lc_iallreduce_sum(ps->rep, r->piece, r->piece_n, LC_DT_F32, &r->req);
  }
  const size_t s = lc_ps_shard_floats(ps, u);
  // (hv_out: stage 1 the unit's range, stage 2 this rank's shard of it)
  float *slice = ps->stage == 1 ? (float *)r->hv_out.host + (size_t)ps->zrank * s : (float *)r->hv_out.host;
  r->p0_done = 0;
  r->phase = 1;
  return lc_iallreduce_sum(ps->rep, slice, s, LC_DT_F32, &r->req);
}

// Moves every reduction on as far as it can without blocking (block: wait instead, for
// the oldest `nwait` reductions).
static lc_status progress(lc_pstore *ps, int nwait) {
  lc_status st = LC_OK;
  int in_order = 1; // every older reduction has started its phase 1 (or needs none)
  for (int i = 0; i < ps->n_red_ && st == LC_OK; i++) {
    lc_ps_red *r = &ps->red_[i];
    for (;;) {
      if (r->done) break;
      if (r->p0_done) {
        if (!in_order) break;
        st = start_phase1(ps, r);
        if (st != LC_OK) break;
        continue;
      }
      int complete = i < nwait ? (st = lc_wait(lc_ps_red_comm(ps, r), &r->req), st == LC_OK)
                               : lc_test(lc_ps_red_comm(ps, r), &r->req);
      if (st != LC_OK || !complete) break;
      st = r->phase == 0 ? phase0_done(ps, r) : red_finish(ps, r);
    }
    in_order = in_order && (r->done || r->phase == 1);
  }
  return st;
}

void lc_pstore_poll(lc_pstore *ps) {
  if (progress(ps, 0) != LC_OK) return; // reported when the reduction is waited for
  if (lc_ps_params_sharded(ps)) {
    for (int u = 0; u < ps->lay.n_units; u++)
      if (ps->u_[u].greq.active) lc_test(ps->zg, &ps->u_[u].greq);
    for (int i = 0; i < 4; i++)
      if (ps->rows_[i] && ps->rows_[i]->req.active) lc_test(ps->zg, &ps->rows_[i]->req);
  }
}

// Completes the oldest reductions until at most `keep` are in flight; frees their
// temporary gradient buffers (stage >= 2).
lc_status lc_ps_retire(lc_pstore *ps, int keep) {
  if (ps->n_red_ <= keep) return LC_OK;
  const int n = ps->n_red_ - keep;
  LC_TRY(progress(ps, n)); // the oldest n complete (in order), the rest move on if they can
  for (int i = 0; i < n; i++) {
    lc_ps_red *r = &ps->red_[i];
    if (r->unit < 0) {
      lc_buf_free(&r->gbuf);
      free(r->cnt);
      continue;
    }
    lc_buf_free(&ps->u_[r->unit].gbuf);
  }
  memmove(ps->red_, ps->red_ + n, sizeof *ps->red_ * (size_t)keep);
  ps->n_red_ = keep;
  return LC_OK;
}

lc_status lc_pstore_grad_begin(lc_pstore *ps, int unit) {
  lc_ps_trace_event(ps, 'B', unit, -1);
  LC_TRY(lc_ps_retire(ps, 1));
  lc_ps_unit *x = &ps->u_[unit];
  if (lc_ps_grads_sharded(ps) && !lc_buf_ok(x->gbuf)) {
    LC_TRY(lc_buf_alloc(ps->be, LC_MEM_GRADS, LC_DT_F32, ps->lay.units[unit].n, 1, "unit gradient buffer", &x->gbuf));
    lc_ps_set_views(ps, &ps->g, unit, x->gbuf);
  }
  if (ps->dev && !lc_buf_ok(x->dg)) { // (a tied embedding's is opened early: kept, not zeroed again)
    LC_TRY(lc_buf_alloc(ps->dev, LC_MEM_GRADS, LC_DT_F32, ps->lay.units[unit].n, 1,
                        "a unit's gradient on the device (--offload-optimizer)", &x->dg));
    lc_ps_set_views(ps, &ps->g, unit, x->dg);
  }
  x->gopen = 1;
  return LC_OK;
}

lc_status lc_pstore_grad_end(lc_pstore *ps, int unit) {
  lc_ps_trace_event(ps, 'E', unit, -1);
  lc_test_point("reduce");
  lc_ps_unit *x = &ps->u_[unit];
  x->gopen = 0;
  const lc_param_unit *U = &ps->lay.units[unit];
  if (ps->dev) LC_TRY(lc_ps_offload_down(ps, unit));
  if (ps->stage <= 1 && !ps->last_) return LC_OK; // stages 0/1 accumulate, reduce once per step
  if (ps->stage == 0 && (!ps->world || ps->world->size == 1)) return LC_OK;
  lc_ps_red *r = &ps->red_[ps->n_red_];
  memset(r, 0, sizeof *r);
  r->unit = unit;
  lc_status st;
  const size_t s = lc_ps_shard_floats(ps, unit);
  if (ps->stage <= 1) {
    st = lc_buf_hview_open(lc_ps_unit_of(ps, ps->grads_b, unit), 1, "a gradient reduction (staged)", &r->hv_out);
    if (st == LC_OK && ps->stage == 0) st = lc_iallreduce_sum(ps->world, r->hv_out.host, U->n, LC_DT_F32, &r->req);
    else if (st == LC_OK) st = lc_ireduce_scatter_sum(ps->zg, NULL, r->hv_out.host, s, LC_DT_F32, &r->req);
  } else {
    // The shard already holds earlier passes' sums: one replica adds them to its slice of
    // the input, so the reduction leaves shard = earlier + this pass, counted once.
    const lc_buf acc = lc_buf_view(ps->grads_b, lc_ps_shard_off(ps, unit), s);
    st = ps->passes_ > 0 && ps->rrank == 0 ? lc_be_add(lc_buf_view(x->gbuf, (size_t)ps->zrank * s, s), acc) : LC_OK;
    lc_ps_set_views(ps, &ps->g, unit, LC_PS_NONE);
    if (st == LC_OK) st = lc_buf_hview_open(x->gbuf, 1, "a ZeRO-2 reduction's input (staged)", &r->hv_in);
    if (st == LC_OK) st = lc_buf_hview_open(acc, 0, "a ZeRO-2 reduction's shard (staged)", &r->hv_out);
    if (st == LC_OK) st = lc_ireduce_scatter_sum(ps->zg, r->hv_in.host, r->hv_out.host, s, LC_DT_F32, &r->req);
  }
  if (st != LC_OK) { // not queued: its views go now
    lc_buf_hview_close(&r->hv_in, 0);
    lc_buf_hview_close(&r->hv_out, 0);
    return st;
  }
  ps->n_red_++;
  return LC_OK;
}

lc_status lc_pstore_finish_grads(lc_pstore *ps) { return lc_ps_retire(ps, 0); }
