// The parameter store: the flat fp32 parameters, gradients and AdamW moments of a model,
// and which part of them this rank holds (ZeRO; DESIGN.md, "Model states and ZeRO").
//
// The flat buffers follow lc_param_layout: units (embedding, each layer, final norm + head)
// in order, each padded to split into Z equal shards. A zero group is Z consecutive ranks
// holding one full copy of the states between them; rank i of a group holds shard i of
// every unit. The W/Z groups are replicas of each other.
//   stage 0  everything replicated; each unit's gradient is all-reduced over the world.
//   stage 1  AdamW moments sharded. Gradients stay full-size in memory; at the end of the
//            step's last backward pass each unit is reduce-scattered in the group (and
//            all-reduced across groups); each rank updates its shard of the parameters,
//            which are then all-gathered in the group (lc_pstore_update).
//   stage 2  also gradients: a unit's gradient lives in a temporary full buffer while
//            backward produces it, is reduce-scattered as soon as the unit is done (every
//            pass), and only this rank's shard is kept.
//   stage 3  also parameters: a unit's weights are all-gathered into a temporary buffer
//            when the model acquires them (the next unit's gather is issued at the same
//            time, so it runs while this one computes) and freed when it releases them.
// Gradient reductions and gathers are non-blocking; lc_pstore_poll progresses them (the
// model calls it between blocks of work). Temporary buffers are freed at fixed points
// (never on completion), so the memory peaks are the same in every run: at most two
// units' gradients are in flight (lc_pstore_grad_begin waits for older ones).
#ifndef LC_PSTORE_H
#define LC_PSTORE_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/bufcomm.h"
#include "core/arena.h"
#include "core/dtype.h"
#include "comm/comm.h"
#include "model/config.h"
#include "model/params.h"
#include "backend/cpu/kern/kernels.h"

// The part of one tensor this rank updates, with its offsets in this rank's params,
// grads and AdamW m/v buffers (each buffer is full-size or a shard, depending on stage).
typedef struct {
  size_t full;       // where the piece starts in the full flat buffer (the layout's offsets)
  size_t p, g, o, n; // offsets (floats) in this rank's buffers and length
  int decay;         // AdamW weight decay applies
  int tensor;        // table index
} lc_ps_segment;

typedef enum { LC_PS_PARAMS = 0, LC_PS_EXP_AVG, LC_PS_EXP_AVG_SQ } lc_ps_state;

// A range of rows of one tensor acquired, and its gradient reduced, on its own, so that no
// rank ever holds the whole tensor's gathered weights or gradient (model.c, vocab_slice).
// Under stage 3 the rows are all-gathered from the ranks whose shards they overlap (an
// uneven all-gather: most ranks send nothing for a given slice); under stage >= 2 their
// gradient is reduce-scattered onto those shards (stage 2 and 3: the shard's earlier sums
// are added by one replica first, so a range may be reduced several times per pass, e.g.
// a tied embedding's rows by the LM head and again by the embedding's backward). Stages
// 0/1 point into the full buffers (bf16 compute: a rounded copy of the rows) and leave the
// reduction to the unit's: call lc_pstore_rows_done once the unit's ranges are done.
// In a bf16 pass a matrix's rows are used in 2 bytes (w is BF16), as a unit's compute copy
// holds its matrices (stage 3 gathers them straight into it); a vector's (the final norm)
// are rounded values in fp32.
typedef struct {
  int tensor;       // table index
  size_t r0, r1;    // rows [r0, r1) ([rows, cols] tensors; a 1-D tensor is one row)
  lc_buf w;         // after lc_pstore_rows_acquire: the rows' weights [r1 - r0, cols], F32 or BF16
  lc_buf g;         // after lc_pstore_rows_grad_begin: their gradient (accumulate into it)
  // private
  size_t x0, n;     // floats [x0, x0 + n) of the full flat buffer
  lc_buf buf;       // gathered (stage 3) or rounded (bf16) rows (U8); empty: w views params
  lc_buf gbuf;      // stage >= 2: the temporary gradient rows
  int *cnt;         // stage 3 gather: per zero-group rank, counts then displacements
  lc_req req;
  lc_buf_hview hv;  // stage 3 gather: buf's host view (backend/bufcomm.h)
  int g16, acquired;
} lc_ps_rows;

typedef struct lc_ps_unit lc_ps_unit;
typedef struct lc_ps_red lc_ps_red;

// A record of the unit calls of passes, for tests of the pass schedule (model/schedule.h):
// kind 'A' acquire, 'P' prefetch, 'R' release, 'B' grad_begin, 'E' grad_end.
typedef struct {
  struct {
    char kind;
    int unit, next;
  } *ev;
  int n, cap; // n counts every call, also those past cap
} lc_ps_trace;

typedef struct {
  lc_config cfg;
  lc_param_layout lay;
  int stage;        // 0..3
  int Z, zrank;     // zero-group size and this rank's index in it (stage 0: 1, 0)
  int R, rrank;     // replicas (W / Z groups) and this rank's group index
  lc_comm *world;   // not owned; NULL: a local store (one process, nothing to reduce)
  lc_comm *zg, *rep; // owned: the zero group and the replica group (NULL for stage 0)
  lc_arena *arena;   // host memory (the backend's: be->host)
  lc_backend *be;    // where the states live (owned: lc_pstore_create makes a CPU backend)
  lc_backend *dev;   // the optimizer offloaded (lc_pstore_offload): the device the passes run
                     // on, the states on be (host memory); NULL: the passes run on be
  // This rank's storage (full or shard, by stage) as the backend's buffers; m_b, v_b and
  // norm_acc_b (one double: the gradient's sum of squares) once an optimizer is added.
  lc_buf params_b, grads_b, m_b, v_b, norm_acc_b;
  // Their host addresses where the backend's memory is host memory, else NULL
  // (transitional, backend.h: the passes and the loaders still use them).
  float *params, *grads, *m, *v;
  size_t n_params, n_grads, n_opt; // floats in each
  lc_ps_segment *seg; // this rank's pieces of every tensor (the optimizer's work)
  int n_seg;
  lc_weights w, g;    // views: the current weights and gradient buffers of acquired units
  size_t vocab_rows;  // rows per vocabulary slice the passes use (0: whole units); set by the
                      // model's pass, read by lc_pstore_step_bytes
  lc_dtype store;     // LC_DT_F32, or LC_DT_BF16: a frozen LoRA base held in 2 bytes (its config's
                      // lora.base_bf16; stage 0, bf16 passes only, no gradients): params_b is BF16,
                      // params NULL; an acquired unit's matrices are views of it, its vectors
                      // widened into a small copy
                      // or LC_DT_U8: a frozen base in a GGUF file's blocks (QLoRA; cfg.base_q, stage 0
                      // or 3, no gradients): the full layout holds each tensor at its own byte offset
                      // in its own dtype (lc_pstore_held_dtype: the quantized projections as blocks,
                      // the other matrices BF16 with lora.base_bf16 else F32, the vectors F32, rounded
                      // to bf16 values with base_bf16), each unit padded to 64 Z bytes; params NULL.
                      // Stage 0: params_b is that layout, the views fixed at create. Stage 3: params_b
                      // holds this rank's 1/Z of each unit's bytes; a unit is gathered byte for byte
                      // and viewed where its tensors lie in the gathered copy
  lc_dtype compute;   // LC_DT_F32, or LC_DT_BF16: an acquired unit's view holds its weights
                      // rounded to bf16 in 2 bytes (stage 3: gathered as bf16, half the
                      // bytes; otherwise a copy made at acquire, freed at release): the
                      // matrices' views are BF16, the vectors widened into fp32 after them
  // private
  lc_ps_unit *u_;
  lc_ps_red *red_;
  int n_red_, want_grads_, last_, passes_, step_passes_, be_owned_;
  lc_ps_rows *rows_[4]; // row ranges whose gather may be in flight (polled)
  lc_ps_trace *trace;   // tests: NULL, or where the unit calls are recorded
  size_t *hoff_;        // a U8 store: each tensor's byte offset in the full layout
  lc_dtype *hdt_;       // and its dtype
  size_t *uoff_;        // and each unit's (n_units + 1: the last is the layout's size)
} lc_pstore;

// The one check of a ZeRO request, for the trainer, the planner and the store: stage in
// 0..3; group (0: all `ranks`) divides ranks; group_given (the flag was set) needs stage >= 1.
lc_status lc_zero_check(int stage, int group, int group_given, int ranks);

// A store for cfg with parameters (zero) and gradients. world NULL: local (stage must be
// 0). group: the zero-group size Z (0 = the whole world); it must divide the world size.
lc_status lc_pstore_create(lc_pstore *ps, const lc_config *cfg, int stage, int group, lc_comm *world,
                           lc_arena *arena);
// The same with the states on backend `be` (not owned; its host arena serves the rest).
// Without host-addressable memory everything runs: the collectives (gradient reductions,
// ZeRO-3 gathers of units and vocabulary rows, the stage 1/2 parameter gather) stage their
// ranges through host memory of the backend's host arena (category comm; named
// LC_SYNC_STAGE reads before a collective is posted and writes once it has completed).
lc_status lc_pstore_create_on(lc_pstore *ps, const lc_config *cfg, int stage, int group, lc_comm *world,
                              lc_backend *be);
// The optimizer offloaded (--offload-optimizer): the store's states stay on its backend (a
// CPU backend: host memory, AdamW on the CPU cores) and the passes run on `dev`. An
// acquired unit's weights (as the stage makes them on the host: the parameters, the bf16
// rounded copy, the ZeRO-3 gathered copy) go up into one device buffer per unit and are
// freed at release; a unit's gradient is a zeroed device buffer from grad_begin to
// grad_end, then comes down and is added into the host gradient the stage reduces. One
// pass per step gives the same bits as without; several add each pass's sum into the
// earlier ones (a different order of the same additions). The transfers are named reads
// and writes (LC_SYNC_OFFLOAD), blocking. Not with vocabulary slices or a frozen base
// (LC_EINVAL).
lc_status lc_pstore_offload(lc_pstore *ps, lc_backend *dev);
// The backend the passes run on (dev, else be).
static inline lc_backend *lc_pstore_device(const lc_pstore *ps) { return ps->dev ? ps->dev : ps->be; }
// AdamW moments m and v (zero), for training.
lc_status lc_pstore_add_optimizer(lc_pstore *ps);
// Inference: the gradient buffers go (their memory back to the arena).
void lc_pstore_drop_grads(lc_pstore *ps);
void lc_pstore_destroy(lc_pstore *ps);
// HF-style random init (lc_param_init_tensor in table order): the same values for every
// stage, group and world size. A U8 store's tensors held in blocks keep their bytes (they come from a file:
// lc_pstore_set_tensor_raw).
lc_status lc_pstore_init_random(lc_pstore *ps, uint64_t seed);

// ---- one forward/backward pass (the model calls these; see model.c for the order)
// want_grads: a training pass. Stages 0/1 reduce in the step's last pass (see step_begin).
void lc_pstore_pass_begin(lc_pstore *ps, int want_grads);
lc_status lc_pstore_pass_end(lc_pstore *ps);
// Makes unit's weights available in ps->w (stage 3: gathered; bf16 compute: rounded) and
// starts gathering `next` (-1: none). Release drops the gathered or rounded copy.
lc_status lc_pstore_acquire(lc_pstore *ps, int unit, int next);
void lc_pstore_release(lc_pstore *ps, int unit);
// Gradient buffers of a unit in ps->g (zeroed when temporary), accumulated by backward.
// Begin waits for all but the most recent reduction still in flight. End hands the
// unit's gradient to its reduction (stage 0/1: only in the last pass).
lc_status lc_pstore_grad_begin(lc_pstore *ps, int unit);
lc_status lc_pstore_grad_end(lc_pstore *ps, int unit);
// Progresses reductions and gathers in flight (never blocks).
void lc_pstore_poll(lc_pstore *ps);

// ---- row ranges of one tensor (vocabulary slices of the embedding and the LM head;
// lc_ps_rows above)
// Columns of a tensor's rows (shape[1], or numel for a 1-D tensor) and its row count.
size_t lc_pstore_row_len(const lc_pstore *ps, int tensor);
size_t lc_pstore_n_rows(const lc_pstore *ps, int tensor);
// Sets r to rows [r0, r1) of tensor without fetching them (for a gradient alone).
void lc_pstore_rows_init(const lc_pstore *ps, lc_ps_rows *r, int tensor, size_t r0, size_t r1);
// Starts fetching rows [r0, r1) of tensor (stage 3: the gather is issued; it runs while the
// caller computes, progressed by lc_pstore_poll).
lc_status lc_pstore_rows_fetch(lc_pstore *ps, lc_ps_rows *r, int tensor, size_t r0, size_t r1);
// Waits for the rows: r->w holds them (in the compute dtype's values).
lc_status lc_pstore_rows_acquire(lc_pstore *ps, lc_ps_rows *r);
// Drops the gathered or rounded copy (also a fetch never acquired).
void lc_pstore_rows_release(lc_pstore *ps, lc_ps_rows *r);
// Gradient rows in r->g (stage >= 2: a zeroed temporary buffer; otherwise the full gradient
// buffer's rows). Like lc_pstore_grad_begin, first waits for all but the most recent
// reduction in flight.
lc_status lc_pstore_rows_grad_begin(lc_pstore *ps, lc_ps_rows *r);
// Stage >= 2: hands the rows' gradient to its reduction (the buffer is freed when it
// retires). Stages 0/1: nothing.
lc_status lc_pstore_rows_grad_end(lc_pstore *ps, lc_ps_rows *r);
// Every range of `unit` has ended its gradient for this pass: stages 0/1 reduce the unit
// as lc_pstore_grad_end does (in the step's last pass); stages >= 2 have nothing left.
lc_status lc_pstore_rows_done(lc_pstore *ps, int unit);
// Starts the stage-3 gather of a whole unit ahead of its acquire (no-op otherwise).
lc_status lc_pstore_prefetch(lc_pstore *ps, int unit);
// Arena bytes of one acquired range of n values of a matrix (matrix = 1) or a vector
// (gathered or rounded copy: 0 when it is a view) and of its temporary gradient, for the
// memory model.
// held16: the store holds its parameters in bf16 (a frozen base, lora.base_bf16), whose
// matrix rows are used where they lie below stage 3.
size_t lc_pstore_rows_bytes(int stage, int bf16, int held16, int matrix, size_t n);
// The same for a frozen base in GGUF blocks (a U8 store): rows held in `held` (blocks, BF16
// or F32) are views below stage 3 and gathered as held under it.
size_t lc_pstore_rows_bytes_q(int stage, lc_dtype held, size_t n);
size_t lc_pstore_rows_grad_bytes(int stage, size_t n);

// ---- the step around the passes
// Zeroes the gradients for a step of `passes` training passes (0: unknown, every pass
// reduces; only right for local stores and one-pass steps).
void lc_pstore_step_begin(lc_pstore *ps, int passes);
// Waits for every reduction: this rank's segments of ps->grads hold the step's sums.
lc_status lc_pstore_finish_grads(lc_pstore *ps);
// The optimizer step over the store, in one call (collective): waits for every gradient
// reduction, computes the global gradient norm (*norm, identical on every rank), and when
// `apply` is set and the norm is finite, scales the gradients by the clip factor for
// max_norm (0: no clipping), applies AdamW update ++*adam_step to this rank's segments
// (weight decay where the segment's tensor decays) and, under stages 1/2, all-gathers the
// parameters. *applied says whether it updated (nothing changes otherwise). Every data
// loop runs through the kernel table.
lc_status lc_pstore_update(lc_pstore *ps, const lc_adamw_hp *hp, float max_norm, int apply, long *adam_step,
                           double *norm, int *applied);

// ---- one tensor at a time (loading, saving)
// Tensor t of `which` in place when this rank holds all of it (the buffer is replicated)
// in host-addressable memory, else NULL.
float *lc_pstore_tensor_ptr(lc_pstore *ps, lc_ps_state which, int t);
// Sets this rank's part of elements [first, first + n) of tensor t of `which` from src,
// which holds those n elements of the full tensor (every rank calls it).
void lc_pstore_set_tensor_part(lc_pstore *ps, lc_ps_state which, int t, size_t first, const float *src, size_t n);
// The dtype tensor t's parameters are held in (a U8 store's per tensor; else ps->store).
lc_dtype lc_pstore_held_dtype(const lc_pstore *ps, int t);
// A U8 store's quantized tensor t: nbytes of its blocks from byte byte_off of the tensor
// (rows of blocks as the file holds them) set from src. LC_EINVAL for a tensor not held in
// blocks, or a range outside it. (Dense tensors are set with lc_pstore_set_tensor_part.)
lc_status lc_pstore_set_tensor_raw(lc_pstore *ps, int t, size_t byte_off, const void *src, size_t nbytes);
// Collective over the world: world rank 0 receives tensor t of `which` in full into dst
// (other ranks pass NULL). Only zero group 0 sends; memory: one tensor on rank 0.
lc_status lc_pstore_gather_tensor(lc_pstore *ps, lc_ps_state which, int t, float *dst);
// The same for elements [first, first + n) of the tensor (dst holds n).
lc_status lc_pstore_gather_tensor_part(lc_pstore *ps, lc_ps_state which, int t, size_t first, size_t n, float *dst);

// The dtype the views of acquired units hold (LC_DT_F32 or LC_DT_BF16); set between steps.
void lc_pstore_set_compute(lc_pstore *ps, lc_dtype compute);

// ---- sizes, for the memory model and the byte formulas
// The optimizer's sum-of-squares accumulator (one double on the backend, LC_MEM_OPTIM).
#define LC_PS_NORM_ACC_BYTES sizeof(double)
typedef struct {
  size_t params, grads, optim; // persistent bytes per rank (optim: m, v and the norm's
                               // accumulator, LC_PS_NORM_ACC_BYTES)
  size_t unit_embed, unit_layer, unit_final; // bytes of one unit's full (padded) copy
  // bytes of a unit's compute copy in a bf16 pass (2 bytes per value, plus its vectors in
  // fp32: pstore.c, copy16)
  size_t unit_embed16, unit_layer16, unit_final16;
  size_t padding;              // bytes of padding in one full fp32 flat buffer
  // A frozen base in GGUF blocks under stage 3 (a U8 store): each unit's gathered bytes, its
  // tensors in their stored dtypes (layers differ by their block types); 0 otherwise.
  size_t unit_q[LC_MAX_LAYERS + 2];
} lc_ps_sizes;
lc_status lc_pstore_sizes(const lc_config *cfg, int stage, int Z, lc_ps_sizes *out);
// Bytes of one full copy of parameter unit u of a model with n_layers layers.
static inline size_t lc_ps_unit_bytes(const lc_ps_sizes *z, int n_layers, int u) {
  if (z->unit_q[u]) return z->unit_q[u];
  return u == LC_UNIT_EMBED ? z->unit_embed : u == lc_unit_final(n_layers) ? z->unit_final : z->unit_layer;
}
// Bytes of unit u's compute copy (acquired weights: gathered under stage 3, or the rounded
// copy of a bf16 pass) in a pass computing in `compute`.
static inline size_t lc_ps_copy_bytes(const lc_ps_sizes *z, int n_layers, int u, lc_dtype compute) {
  if (compute != LC_DT_BF16 || z->unit_q[u]) return lc_ps_unit_bytes(z, n_layers, u); // (blocks: as stored)
  return u == LC_UNIT_EMBED ? z->unit_embed16 : u == lc_unit_final(n_layers) ? z->unit_final16 : z->unit_layer16;
}
// Bytes this rank sends for model states in one training step of `passes` forward/backward
// passes (the sequences of its data-parallel group), by the formulas of the stage.
// compute: the passes' precision (LC_DT_BF16: stage 3 gathers bf16 weights).
double lc_pstore_step_bytes(const lc_pstore *ps, int passes, lc_dtype compute);

const char *lc_zero_stage_desc(int stage);

#endif
