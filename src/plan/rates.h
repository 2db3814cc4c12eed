// The rates the time model prices a step with (DESIGN.md "Planning"): GEMM FLOP/s by shape
// and precision, attention-kernel FLOP/s forward/backward by head dim and precision,
// element-wise bandwidth, and the communicator's latency and bandwidth per collective.
// Three sources fill them: `longctx calibrate` (measured on this machine, one profile per
// ranks x threads in a machine file), a hardware description (`--hardware FILE.json`: a
// GPU node), or built-in defaults (2 Zen 4 cores, 2 threads; documented in docs/NOTES.md).
#ifndef LC_RATES_H
#define LC_RATES_H

#include <stddef.h>

#include "core/status.h"
#include "backend/cpu/gemm/sgemm.h"

#define LC_RATE_NDIM 4   // GEMM K and N grid: 64, 256, 1024, 4096 (clamped outside)
#define LC_RATE_NHD 3    // attention head dims: 32, 64, 128
#define LC_RATE_GEMM_T 1024 // tokens (M) of the calibrated GEMMs
#define LC_RATE_NROWS 5  // GEMM rows of the row factors: 64, 256, 1024, 4096, 16384
#define LC_RATE_NLEN 4   // attention key lengths of the length factors: 1K, 4K, 16K, 64K

// The classes of work a rate prices, in the order of the backend's op classes (gemm,
// attention, loss, element-wise, optimizer): which rates a run corrected (from_run bits).
enum { LC_RATE_GEMM = 0, LC_RATE_ATTN, LC_RATE_LOSS, LC_RATE_EW, LC_RATE_OPTIM, LC_RATE_NCLASS };

typedef enum { LC_COLL_P2P = 0, LC_COLL_ALLTOALL, LC_COLL_ALLGATHER, LC_COLL_REDUCE_SCATTER, LC_COLL_ALLREDUCE, LC_COLL_N } lc_coll;

// Cost of a collective over g ranks moving n bytes (p2p: one message; all-to-all: the send
// buffer; all-gather: the output; reduce-scatter and all-reduce: the input):
//   lat * steps + n * frac / bw, steps = g - 1 (p2p 1), frac = (g-1)/g (p2p 1, all-reduce 2(g-1)/g).
typedef struct {
  double lat_s, bw; // seconds per step, bytes/s
} lc_link;

typedef struct lc_rates {
  char source[320];     // where the numbers come from, for the settings table
  int builtin;          // the built-in defaults (another CPU's): train predicts nothing from them
  int ranks, threads;   // the profile's process grid (calibrated) or 0
  int devices_per_node; // ranks sharing the intra-node link (0: all)
  double gemm[2][2][LC_RATE_NDIM][LC_RATE_NDIM]; // [bf16][0: forward NT, 1: backward NN+TN][K][N] FLOP/s
  double flash[2][2][LC_RATE_NHD]; // [bf16][0 fwd, 1 bwd][head dim] FLOP/s of the tiles computed
  double ew_bw;         // element-wise bytes/s (read + write) as the time model counts a layer's passes
  double optim_bw;      // AdamW and the gradient norm: bytes/s as the model counts them (28 + 8 per parameter)
  double loss_bw;       // the loss tile's softmax passes: bytes/s as the model counts them (12 per logit)
  lc_link coll[LC_COLL_N]; // within a node
  lc_link inter;        // between nodes (one link per rank); bw 0: one node only
  double disk_bw;       // checkpoint offload bytes/s each way (0: unknown)
  double host_link_bw;  // --offload-optimizer: bytes/s each way between the host and the device
                        // (0: the device is host memory too, a copy at the element-wise rate)
  double host_optim_bw; // --offload-optimizer: the host's AdamW, bytes/s as optim_bw counts them
                        // (0: optim_bw, the same memory)
  double mem_bytes;     // memory per rank of a hardware description (0: not given)
  double host_mem_bytes; // host memory per node of a hardware description ("host_memory_per_node_gib";
                         // 0: not given): --offload-optimizer's model states must fit it
  double small_t_exp;   // without row factors: GEMMs of T < LC_RATE_GEMM_T tokens cost (LC_RATE_GEMM_T / T)^this
                        // more per FLOP (CPU defaults and older profiles: 0.15; hardware descriptions: 0)
  // A GEMM's rate at 64 .. 16384 rows over its rate at LC_RATE_GEMM_T rows (K = N = 512),
  // by precision and direction (all 0: not measured, small_t_exp instead).
  double gemm_rows[2][2][LC_RATE_NROWS];
  // The attention kernel's rate with 1K .. 64K keys per call over its rate at 1K (head dim
  // 64; K and V leave the caches as they grow), by precision and direction (0: not measured, 1).
  double flash_len[2][2][LC_RATE_NLEN];
  lc_sgemm_table gemm_shapes; // fp32 GEMM shapes with both libraries' rates (train --calibrate-from-run; backend/cpu/gemm/sgemm.h)
  unsigned from_run;    // bits 1 << LC_RATE_*: rates a training run corrected (train --calibrate-from-run)
  char cpu[160];        // the CPU the profile was measured on (lc_cpu_describe; "" unknown)
  char warning[480];    // non-empty: why these rates may not hold here (another CPU, other threads per rank)
} lc_rates;

// The built-in defaults (measured once on 2 Zen 4 cores; compute rates scaled by
// threads / 2 per rank; docs/NOTES.md).
void lc_rates_default(lc_rates *r, int threads);
// The profile of machine file `path` for ranks x threads: the exact pair, else the one with
// the same threads per rank and the nearest ranks (said in r->source). A profile measured
// with other threads per rank or on another CPU (its cpu against lc_cpu_describe of this
// one) sets r->warning, naming the difference. LC_EIO / LC_EINVAL with one line for a
// missing or malformed file.
lc_status lc_rates_load_machine(const char *path, int ranks, int threads, lc_rates *r);
// Merges profile r (its ranks x threads, its cpu) into machine file `path` (created if
// absent; an existing profile with the same pair is replaced); written atomically.
lc_status lc_rates_save_machine(const char *path, const lc_rates *r);
// A hardware description (hardware/*.json: achievable TFLOP/s per precision, attention
// fraction, memory bandwidth, intra/inter-node links, memory per device).
lc_status lc_rates_load_hardware(const char *path, lc_rates *r);
// Where calibrate writes without --out: $XDG_CACHE_HOME or ~/.cache, /longctx/machine.json.
const char *lc_rates_cache_path(char *buf, size_t n);
// The machine file plan and train read without --machine: the last one calibrate wrote
// (recorded next to the cache file by lc_rates_note_last), else the cache file.
const char *lc_rates_default_path(char *buf, size_t n);
// Records path (made absolute) as the last machine file written. Best effort: a cache
// folder that cannot be written leaves the previous record.
void lc_rates_note_last(const char *path);

// Seconds of: a linear layer's forward (T x K -> N) or backward (both products) in the
// precision; an attention kernel pass computing `flops` tile FLOPs at head dim D; moving
// `bytes` element-wise; a collective over g ranks (inter: crossing nodes).
double lc_rates_gemm_s(const lc_rates *r, int bf16, int bwd, double T, int K, int N);
// keys: the keys one kernel call streams (the length factors; <= 0: 1K).
double lc_rates_flash_s(const lc_rates *r, int bf16, int bwd, int D, double keys, double flops);
double lc_rates_ew_s(const lc_rates *r, double bytes);
double lc_rates_optim_s(const lc_rates *r, double bytes);
double lc_rates_loss_s(const lc_rates *r, double bytes);
// --offload-optimizer: `bytes` copied between the host and the device one way; the host's
// AdamW and gradient norm over `bytes` as lc_rates_optim_s counts them.
double lc_rates_host_copy_s(const lc_rates *r, double bytes);
double lc_rates_host_optim_s(const lc_rates *r, double bytes);
double lc_rates_coll_s(const lc_rates *r, lc_coll c, int g, double bytes, int inter);

const char *lc_coll_name(lc_coll c);

// Scales the rates of class c (LC_RATE_*) by f and marks them corrected by a run.
void lc_rates_scale(lc_rates *r, int c, double f);
const char *lc_rate_class_name(int c);
// Which rates came from where, for plan and train: "GEMMs, attention: corrected by a run;
// the rest: calibrate" (buf).
const char *lc_rates_provenance(const lc_rates *r, char *buf, size_t n);

#endif
