// One decoder layer of the Llama family, forward and backward, on this rank's T tokens.
//   x_mid = x_in + o_proj(attn(rope(qn(q_proj(n1))), rope(kn(k_proj(n1))), v_proj(n1))),  n1 = rmsnorm1(x_in)
//   x_out = x_mid + down_proj(silu(gate_proj(n2)) * up_proj(n2)),                         n2 = rmsnorm2(x_mid)
// Family variants (config fields, model/arch.h): q/k/v projections with biases (qkv_bias:
// Qwen2), o_proj with a bias (o_bias), qn/kn = RMSNorm over each head's D values (qk_norm:
// Qwen3; identity otherwise); RoPE's scaling is in the cos/sin tables.
// The MLP runs over sequence tiles of `mlp_tile` tokens when tiled; its backward then
// recomputes the tile's n2/gate/up/h, so no [T, ffn] buffer exists.
#ifndef LC_LAYER_H
#define LC_LAYER_H

#include "attn/attn.h"
#include "backend/buf.h"
#include "core/dtype.h"
#include "core/arena.h"
#include "model/config.h"
#include "model/params.h"
#include "model/lora_op.h"

// Activations of one layer that backward reads, as the backend's buffers. Which ones are
// kept per layer and which are recomputed depends on the checkpoint policy (model.c).
// Those the GEMMs and the attention read (ln1, q, k, v, att, ln2, gate, up, h) carry the
// pass's activation dtype (lc_layer_act_dt): 2-byte bf16 in a bf16 pass, fp32 otherwise;
// the residual, the statistics and the per-head norm's inputs are fp32.
typedef struct {
  lc_buf ln1;   // [T,C]  rmsnorm1 output (act dtype)
  lc_buf rstd1; // [T]
  lc_buf q;     // [T,Hq*D]  after RoPE (act dtype)
  lc_buf k;     // [T,Hkv*D] after RoPE (act dtype)
  lc_buf v;     // [T,Hkv*D] (act dtype)
  // qk_norm only (empty otherwise): q and k before their per-head norm, and its rstd.
  lc_buf qp;    // [T,Hq*D]
  lc_buf kp;    // [T,Hkv*D]
  lc_buf rstdq; // [T*Hq]
  lc_buf rstdk; // [T*Hkv]
  lc_buf att;   // [T,Hq*D]  attention output (input of o_proj; act dtype)
  lc_buf saved; // attention strategy state (e.g. lse; U8)
  lc_buf x_mid; // [T,C]  residual after attention
  // Untiled MLP only (empty when tiled): kept from forward so backward need not recompute.
  lc_buf ln2;   // [T,C] (act dtype)
  lc_buf rstd2; // [T]
  lc_buf gate;  // [T,F] (act dtype)
  lc_buf up;    // [T,F] (act dtype)
  lc_buf h;     // [T,F] (act dtype)
} lc_layer_acts;

// The dtype of the activations the layer's GEMMs and attention read (ln1, q, k, v, att, ln2,
// gate, up, h).
static inline lc_dtype lc_layer_act_dt(int bf16) { return bf16 ? LC_DT_BF16 : LC_DT_F32; }

// Everything a layer computation needs besides weights and activations.
typedef struct {
  const lc_config *cfg;
  lc_attn *attn;
  // The pass's attention inputs (attn.h), handed to every call of the strategy; its bf16
  // is the layer's.
  const lc_attn_in *attn_in;
  lc_buf rope_cos, rope_sin; // [T, D/2]
  int T;
  int mlp_tile;   // tokens per MLP tile; <= 0 or >= T: untiled (acts->ln2.. must be set)
  // bf16 precision: every GEMM operand and attention input holds a bf16 value (rounded to
  // nearest even where it is made: ln1, q, k, v, att, ln2, gate, up, h, the layer output,
  // and in backward a copy of dx, datt, dg, du, dq, dk, dv; the weights are the store's
  // bf16 compute copy), so the GEMMs and kernel compute bf16 x bf16 products exactly with
  // fp32 accumulation; ln1, q, k, v, att, ln2, gate, up, h and the copies of dx, datt, dg,
  // du are stored in 2 bytes (dq, dk, dv: rounded in fp32 slots). Norm statistics, RoPE,
  // softmax, residual sums and gradients stay fp32.
  int bf16;
  // Called between the layer's GEMMs (may be NULL): progresses communication in flight
  // (ZeRO reductions and gathers), which MPI does not move on its own.
  void (*poll)(void *arg);
  void *poll_arg;
  // The backend every op of the layer runs on, which holds the weights, the activations
  // and the scratch (category scratch, counted in its arena); the attention strategy gets it.
  struct lc_backend *be;
  // LoRA (lora.R > 0): the adapters of the weights' lora_a/lora_b that are set run beside
  // their projections (model/lora_op.h); the frozen weights' gradients are empty (skipped).
  lc_lora_ctx lora;
} lc_layer_ctx;

// Forward. x_out may be empty (recompute for backward: stops after the MLP's saved parts).
// skip_attn: att/saved are already valid (selective checkpointing), attention is not re-run.
// x_in, x_out: [T,C] fp32.
lc_status lc_layer_fwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_acts *a, lc_buf x_in, lc_buf x_out,
                       int skip_attn);

// Floats of the per-head norm's extra activations (qp, kp, rstdq, rstdk), each padded to 16
// floats; 0 without qk_norm.
size_t lc_layer_qknorm_floats(const lc_config *cfg, int T);
// Carves them from p (F32, lc_layer_qknorm_floats of them) into a, or (p empty, or no
// qk_norm) sets them empty.
void lc_layer_qknorm_carve(lc_layer_acts *a, const lc_config *cfg, int T, lc_buf p);

// Arena bytes (category scratch) the layer itself allocates for T tokens, by phase; the
// attention strategy's own buffers are lc_attn_mem's. The layer sizes its buffers with
// the same functions, so the memory model (memplan.c) and the allocations agree.
typedef struct {
  size_t mlp_fwd;  // tiled MLP forward: one tile's norm, rstd, gate/up/h (0 when untiled)
  size_t mlp_bwd;  // MLP backward: gradient tile, plus the recompute tile when tiled
  size_t attn_bwd; // attention half of backward, held through it: datt (reused for dn1),
                   // dq, dk, dv (bf16: 2 bytes of dx rounded, then of datt rounded, instead
                   // of datt; the fp32 datt and dn1 live only around their GEMMs: attn_bwd_mm)
  // bf16 GEMMs' operand packing (lc_matmul_*_bytes; 0 in fp32), included in mlp_fwd and
  // mlp_bwd; the attention half's GEMMs run outside the strategy's calls, so they form
  // moments of their own: the projections of forward alone (attn_fwd_mm; bf16: with the
  // fp32 projection each is computed in before RoPE and rounding into its 2-byte slot),
  // and those of backward on top of attn_bwd (attn_bwd_mm = attn_bwd + packing).
  size_t attn_fwd_mm, attn_bwd_mm;
  // The same bytes as named parts (the memory model's peak detail): mlp_fwd, mlp_bwd,
  // attn_bwd, and what attn_fwd_mm and attn_bwd_mm hold beyond attn_bwd.
  lc_mem_parts mlp_fwd_parts, mlp_bwd_parts, attn_bwd_parts, attn_fwd_mm_parts, attn_bwd_mm_parts;
} lc_layer_mem;
// With cfg->lora (rank > 0) the adapters' calls (lc_lora_*_bytes) count at their GEMMs' moments.
// dkv_late: the strategy's lc_attn.dkv_late (dk, dv may lie in q's storage).
void lc_layer_mem_bytes(const lc_config *cfg, int T, int mlp_tile, int bf16, int dkv_late, lc_layer_mem *m);

// Backward. dx[T,C] holds dL/dx_out on entry and dL/dx_in on return. Weight gradients are
// accumulated into g.
lc_status lc_layer_bwd(const lc_layer_ctx *c, const lc_layer_weights *w, lc_layer_weights *g, const lc_layer_acts *a,
                       lc_buf x_in, lc_buf dx);

#endif
