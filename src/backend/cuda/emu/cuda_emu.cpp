// The runtime of the CPU emulation of CUDA (cuda_emu.h): fibers and their scheduler, barriers
// and warp rendezvous, mma.sync, and the shared-memory checks. Compiled without the
// kernel-address instrumentation (its hooks are defined here).
#include "backend/cuda/emu/cuda_emu.h"
#include "backend/cuda/emu/cuda_emu_c.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <map>
#include <vector>

#if !defined(__x86_64__)
#include <ucontext.h>
#endif

namespace lcc_emu {

uint3 g_thread_idx, g_block_idx;
dim3 g_block_dim, g_grid_dim;

namespace {

constexpr size_t kStack = 64 * 1024; // per fiber, plus a guard page below it
constexpr int kMaxThreads = 1024;
constexpr size_t kMaxDynSmem = 163 * 1024; // sm_80's opt-in limit (sm_90: 227 KiB): the build targets both
constexpr size_t kDefaultDynSmem = 48 * 1024;
constexpr int kMaxReports = 8; // findings printed per launch (all are counted)

enum { F_READY, F_BAR, F_WARP, F_DONE };

struct fiber {
#if defined(__x86_64__)
  void *sp;
#else
  ucontext_t ctx;
#endif
  unsigned char *stack; // lowest usable byte (a PROT_NONE page below)
  int state;
  int lin;              // linear thread index in the block
  uint3 tid;
  int bar_result;
};

struct warp_state {
  int count;      // lanes arrived at the pending operation
  unsigned gen;   // completed rendezvous
  unsigned mem_ep; // __syncwarp count: orders the lanes' shared accesses
  const char *op;
  uint32_t buf[2][32][16];
};

// One 2-byte unit of shared memory: the last write and the reads since, with the block
// barrier epoch and the writer's / readers' warp epoch at the time.
struct unit {
  uint64_t w_ep, r_ep;
  uint32_t w_wep, r_wep;
  uint16_t w_tid, r_tid;
  uint8_t r_multi, r_xwarp;
  uint16_t async_tid; // 1 + the thread whose cp.async into this unit is pending; 0: none
};

// A cp.async of one thread: performed (and seen as that thread's write) at the
// cp.async.wait_group that covers its group. group 0: issued, not yet committed.
struct cp_rec {
  unsigned char *dst;
  const unsigned char *src;
  int nsrc; // bytes read from src; the rest of the 16 are zero-filled
  long group;
};

fiber g_f[kMaxThreads];
warp_state g_w[kMaxThreads / 32];
int g_nthreads, g_live, g_bar_count, g_bar_pred;
fiber *g_cur;
int g_in_block;
int g_order; // 0 ascending, 1 descending
int g_failed; // the current launch failed (stop running blocks)
const launch_cfg *g_cfg;
void (*g_invoke)(void *);
void *g_args;
#if defined(__x86_64__)
void *g_sched_sp;
#else
ucontext_t g_sched_ctx;
#endif

cudaError_t g_last_error = cudaSuccess;
long g_findings;
int g_reports_this_launch;
std::map<const void *, int> g_max_dyn;

unsigned char *g_dyn; // kMaxDynSmem bytes
std::vector<unit> g_dyn_shadow, g_static_shadow;
uint64_t g_ep = 1, g_block_ep = 1;
std::vector<cp_rec> g_cp[kMaxThreads]; // each thread's pending cp.async copies
long g_cp_groups[kMaxThreads];         // each thread's committed cp.async groups

} // namespace
} // namespace lcc_emu

// The linker's bounds of the static shared section (absent when no kernel is linked).
extern "C" {
extern char __start_lcc_emu_shared[] __attribute__((weak));
extern char __stop_lcc_emu_shared[] __attribute__((weak));
}

#if defined(__x86_64__)
// lcc_emu_swap(save, to): saves the callee-saved registers on the current stack, stores the
// stack pointer in *save, switches to the stack `to` and restores its registers. A new
// fiber's stack holds six zero registers and the address of lcc_emu_tramp.
extern "C" void lcc_emu_swap(void **save, void *to);
extern "C" void lcc_emu_tramp(void);
asm(R"(
.text
.globl lcc_emu_swap
.type lcc_emu_swap,@function
lcc_emu_swap:
  pushq %rbp
  pushq %rbx
  pushq %r12
  pushq %r13
  pushq %r14
  pushq %r15
  movq %rsp, (%rdi)
  movq %rsi, %rsp
  popq %r15
  popq %r14
  popq %r13
  popq %r12
  popq %rbx
  popq %rbp
  ret
.size lcc_emu_swap,.-lcc_emu_swap
.globl lcc_emu_tramp
.type lcc_emu_tramp,@function
lcc_emu_tramp:
  call lcc_emu_fiber_main
  ud2
.size lcc_emu_tramp,.-lcc_emu_tramp
)");
#endif

namespace lcc_emu {
namespace {

void report(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void report(const char *fmt, ...) {
  g_findings++;
  if (g_last_error == cudaSuccess) g_last_error = cudaErrorLaunchFailure;
  if (g_reports_this_launch++ >= kMaxReports) return;
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "cuda_emu: %s block (%u,%u,%u): ", g_cfg ? g_cfg->name : "?", g_block_idx.x, g_block_idx.y,
          g_block_idx.z);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

void to_sched() {
#if defined(__x86_64__)
  lcc_emu_swap(&g_cur->sp, g_sched_sp);
#else
  swapcontext(&g_cur->ctx, &g_sched_ctx);
#endif
}

void run_fiber(fiber *f) {
  g_cur = f;
  g_thread_idx = f->tid;
#if defined(__x86_64__)
  lcc_emu_swap(&g_sched_sp, f->sp);
#else
  swapcontext(&g_sched_ctx, &f->ctx);
#endif
}

void release_barrier() {
  // A barrier some threads of the block never reach because they exited: sm_70 and later count
  // them as arrived, but CUDA leaves it undefined (a barrier in divergent code): reported.
  if (g_live < g_nthreads)
    report("__syncthreads reached by %d threads after %d of the block's %d exited", g_live, g_nthreads - g_live,
           g_nthreads);
  const int res = g_bar_pred;
  for (int i = 0; i < g_nthreads; i++)
    if (g_f[i].state == F_BAR) g_f[i].state = F_READY, g_f[i].bar_result = res;
  g_bar_count = 0, g_bar_pred = 0;
  g_ep++; // a new barrier interval
}

} // namespace
} // namespace lcc_emu

extern "C" void lcc_emu_fiber_main(void) {
  using namespace lcc_emu;
  g_invoke(g_args);
  g_cur->state = F_DONE;
  g_live--;
  // Threads that exited count as arrived at a pending barrier (as on sm_70 and later; reported).
  if (g_bar_count > 0 && g_bar_count == g_live) release_barrier();
  to_sched();
  abort(); // a finished fiber is never resumed
}

#if !defined(__x86_64__)
static void fiber_entry_uc(void) { lcc_emu_fiber_main(); }
#endif

namespace lcc_emu {
namespace {

void init_fiber(fiber *f) {
  if (!f->stack) {
    const long pg = sysconf(_SC_PAGESIZE);
    void *m = mmap(nullptr, kStack + (size_t)pg, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED) {
      fprintf(stderr, "cuda_emu: cannot map a fiber stack\n");
      abort();
    }
    mprotect(m, (size_t)pg, PROT_NONE); // a stack overflow faults instead of corrupting
    f->stack = (unsigned char *)m + pg;
  }
#if defined(__x86_64__)
  uintptr_t top = ((uintptr_t)(f->stack + kStack)) & ~(uintptr_t)15;
  void **sp = (void **)(top - 72); // 8 mod 16: lcc_emu_tramp starts 16-aligned
  for (int i = 0; i < 6; i++) sp[i] = nullptr;
  sp[6] = (void *)&lcc_emu_tramp;
  sp[7] = sp[8] = nullptr;
  f->sp = sp;
#else
  getcontext(&f->ctx);
  f->ctx.uc_stack.ss_sp = f->stack;
  f->ctx.uc_stack.ss_size = kStack;
  f->ctx.uc_link = nullptr;
  makecontext(&f->ctx, fiber_entry_uc, 0);
#endif
}

void deadlock() {
  int bar = 0, warp = 0, done = 0;
  const char *op = "";
  for (int i = 0; i < g_nthreads; i++) {
    if (g_f[i].state == F_BAR) bar++;
    if (g_f[i].state == F_DONE) done++;
    if (g_f[i].state == F_WARP) warp++, op = g_w[i / 32].op;
  }
  report("deadlock: %d threads wait at __syncthreads, %d at a warp operation (%s), %d exited, of %d", bar, warp, op,
         done, g_nthreads);
  g_failed = 1;
}

unit *unit_of(uintptr_t a); // (below)

// Drops the copies a block issued and never waited for (harmless on the GPU while nothing
// reads them) and their pending marks.
void clear_async() {
  for (int i = 0; i < kMaxThreads; i++) {
    for (const cp_rec &c : g_cp[i])
      for (int b = 0; b < 16; b += 2)
        if (unit *u = unit_of((uintptr_t)c.dst + b)) u->async_tid = 0;
    g_cp[i].clear();
    g_cp_groups[i] = 0;
  }
}

void run_block() {
  g_live = g_nthreads, g_bar_count = 0, g_bar_pred = 0;
  for (int i = 0; i < g_nthreads; i++) {
    fiber *f = &g_f[i];
    f->lin = i, f->state = F_READY, f->bar_result = 0;
    f->tid.x = (unsigned)i % g_block_dim.x;
    f->tid.y = ((unsigned)i / g_block_dim.x) % g_block_dim.y;
    f->tid.z = (unsigned)i / (g_block_dim.x * g_block_dim.y);
    init_fiber(f);
  }
  for (int w = 0; w < (g_nthreads + 31) / 32; w++) g_w[w].count = 0, g_w[w].gen = 0, g_w[w].mem_ep = 0, g_w[w].op = "";
  g_block_ep = ++g_ep;
  clear_async();
  // shared memory poisoned: a value read before it is written is NaN / -1
  if (__start_lcc_emu_shared && __stop_lcc_emu_shared)
    memset(__start_lcc_emu_shared, 0xff, (size_t)(__stop_lcc_emu_shared - __start_lcc_emu_shared));
  memset(g_dyn, 0xff, g_cfg->smem);
  g_in_block = 1;
  while (g_live > 0) {
    int ran = 0;
    for (int k = 0; k < g_nthreads; k++) {
      fiber *f = &g_f[g_order ? g_nthreads - 1 - k : k];
      if (f->state != F_READY) continue;
      run_fiber(f);
      ran = 1;
    }
    if (!ran) {
      deadlock();
      break;
    }
  }
  g_in_block = 0;
}

// ---- shared-memory checks (the instrumentation's hooks land here)

int warp_of(int lin) { return lin / 32; }

// The shadow unit of a shared address (dynamic or static), or NULL.
unit *unit_of(uintptr_t a) {
  const uintptr_t d0 = (uintptr_t)g_dyn, s0 = (uintptr_t)__start_lcc_emu_shared, s1 = (uintptr_t)__stop_lcc_emu_shared;
  if (g_dyn && a >= d0 && a < d0 + kMaxDynSmem) return &g_dyn_shadow[(a - d0) / 2];
  if (s0 && a >= s0 && a < s1) return &g_static_shadow[(a - s0) / 2];
  return nullptr;
}

void check_access(uintptr_t a, size_t n, int is_write) {
  if (!g_in_block || !g_cur) return;
  unit *sh;
  size_t off;
  const char *region;
  const uintptr_t d0 = (uintptr_t)g_dyn, s0 = (uintptr_t)__start_lcc_emu_shared, s1 = (uintptr_t)__stop_lcc_emu_shared;
  if (a >= d0 && a < d0 + kMaxDynSmem) {
    off = a - d0;
    region = "dynamic";
    if (off + n > g_cfg->smem) {
      report("thread %d %s %zu bytes at dynamic shared offset %zu, past the launch's %zu bytes", g_cur->lin,
             is_write ? "writes" : "reads", n, off, g_cfg->smem);
      return;
    }
    sh = g_dyn_shadow.data();
  } else if (s0 && a >= s0 && a < s1) {
    off = a - s0;
    region = "static";
    sh = g_static_shadow.data();
  } else {
    return;
  }
  const int me = g_cur->lin, wme = warp_of(me);
  const uint32_t wep = g_w[wme].mem_ep;
  for (size_t u = off / 2; u < (off + n + 1) / 2; u++) {
    unit *e = &sh[u];
    // an access of another thread is ordered before this one by a barrier (another epoch) or,
    // in the same warp, by a __syncwarp since
    auto ordered = [&](uint64_t ep, int tid, uint32_t wp) {
      return ep != g_ep || tid == me || (warp_of(tid) == wme && wp < wep);
    };
    if (e->async_tid)
      report("thread %d %s %s shared offset %zu while a cp.async of thread %d into it is pending (no "
             "cp.async.wait_group covers it)",
             me, is_write ? "writes" : "reads", region, 2 * u, e->async_tid - 1);
    if (!is_write) {
      if (e->w_ep < g_block_ep)
        report("thread %d reads %s shared offset %zu, never written in this block", me, region, 2 * u);
      else if (!ordered(e->w_ep, e->w_tid, e->w_wep))
        report("race: thread %d reads %s shared offset %zu written by thread %d with no barrier between", me, region,
               2 * u, e->w_tid);
      if (e->r_ep != g_ep) {
        e->r_ep = g_ep, e->r_tid = (uint16_t)me, e->r_wep = wep, e->r_multi = 0, e->r_xwarp = 0;
      } else if (e->r_tid != me) {
        e->r_multi = 1;
        if (warp_of(e->r_tid) != wme) e->r_xwarp = 1;
        e->r_tid = (uint16_t)me;
        if (wep > e->r_wep) e->r_wep = wep;
      }
    } else {
      if (e->w_ep >= g_block_ep && !ordered(e->w_ep, e->w_tid, e->w_wep))
        report("race: thread %d writes %s shared offset %zu written by thread %d with no barrier between", me, region,
               2 * u, e->w_tid);
      else if (e->r_ep == g_ep && (e->r_multi || e->r_tid != me)) {
        const int same_warp_only = !e->r_xwarp && warp_of(e->r_tid) == wme;
        if (!(same_warp_only && e->r_wep < wep))
          report("race: thread %d writes %s shared offset %zu read by thread %d%s with no barrier between", me, region,
                 2 * u, e->r_tid == me ? -1 : (int)e->r_tid, e->r_multi ? " (and others)" : "");
      }
      e->w_ep = g_ep, e->w_tid = (uint16_t)me, e->w_wep = wep;
    }
  }
}

} // namespace

// ---- the header's entry points

void *dyn_shared() { return g_dyn; }

int shared_span_ok(const void *p, size_t n, size_t align, const char *op) {
  if (!g_in_block || !g_cur) abort();
  const uintptr_t a = (uintptr_t)p, d0 = (uintptr_t)g_dyn, s0 = (uintptr_t)__start_lcc_emu_shared,
                  s1 = (uintptr_t)__stop_lcc_emu_shared;
  if (a % align) {
    report("%s by thread %d: shared address %p not %zu-byte aligned", op, g_cur->lin, p, align);
    return 0;
  }
  const int in_dyn = a >= d0 && a + n <= d0 + g_cfg->smem, in_static = s0 && a >= s0 && a + n <= s1;
  if (!in_dyn && !in_static) {
    report("%s by thread %d: %zu bytes at %p are not in the block's shared memory", op, g_cur->lin, n, p);
    return 0;
  }
  return 1;
}
void *opaque(void *p) { return p; }

cudaError_t take_last_error() {
  const cudaError_t e = g_last_error;
  g_last_error = cudaSuccess;
  return e;
}

cudaError_t set_max_dyn_smem(const void *fn, int bytes) {
  if (bytes < 0 || (size_t)bytes > kMaxDynSmem) return cudaErrorInvalidValue;
  g_max_dyn[fn] = bytes;
  return cudaSuccess;
}

void cp_async_16(void *dst, const void *src, int nsrc) {
  const char *op = "cp.async.cg.shared.global (16 bytes)";
  if (!shared_span_ok(dst, 16, 16, op)) return;
  if ((uintptr_t)src % 16 || nsrc < 0 || nsrc > 16) {
    report("%s by thread %d: global source %p not 16-byte aligned or source size %d not in [0, 16]", op, g_cur->lin,
           src, nsrc);
    return;
  }
  // the issue: a write of the destination, racing with this epoch's other accesses; the bytes
  // arrive later, so every access before the covering wait is reported
  check_access((uintptr_t)dst, 16, 1);
  for (int b = 0; b < 16; b += 2) unit_of((uintptr_t)dst + b)->async_tid = (uint16_t)(g_cur->lin + 1);
  g_cp[g_cur->lin].push_back(cp_rec{(unsigned char *)dst, (const unsigned char *)src, nsrc, 0});
}

void cp_async_commit() {
  const int me = g_cur->lin;
  g_cp_groups[me]++;
  for (cp_rec &c : g_cp[me])
    if (!c.group) c.group = g_cp_groups[me];
}

// cp.async.wait_group n: every committed group but the n most recent is complete.
void cp_async_wait(int n) {
  const int me = g_cur->lin;
  std::vector<cp_rec> &v = g_cp[me];
  size_t keep = 0;
  for (size_t i = 0; i < v.size(); i++) {
    cp_rec c = v[i];
    if (!c.group || c.group > g_cp_groups[me] - n) {
      v[keep++] = c;
      continue;
    }
    for (int b = 0; b < 16; b += 2) unit_of((uintptr_t)c.dst + b)->async_tid = 0;
    check_access((uintptr_t)c.dst, 16, 1); // the bytes land now: this thread's write
    memcpy(c.dst, c.src, (size_t)c.nsrc);
    memset(c.dst + c.nsrc, 0, (size_t)(16 - c.nsrc));
  }
  v.resize(keep);
}

long findings() { return g_findings; }
void reset_findings() { g_findings = 0; }
void set_order(int descending) { g_order = descending != 0; }

void run_launch(const launch_cfg &c, void (*invoke)(void *), void *args) {
  if (!g_dyn) {
    g_dyn = (unsigned char *)aligned_alloc(256, kMaxDynSmem);
    g_dyn_shadow.assign(kMaxDynSmem / 2, unit{});
    const size_t ns = __start_lcc_emu_shared ? (size_t)(__stop_lcc_emu_shared - __start_lcc_emu_shared) : 0;
    g_static_shadow.assign(ns / 2 + 1, unit{});
  }
  g_cfg = &c;
  g_reports_this_launch = 0;
  const unsigned long nt = (unsigned long)c.block.x * c.block.y * c.block.z;
  // the launch's configuration, as the GPU checks it
  size_t allowed = kDefaultDynSmem;
  auto it = g_max_dyn.find(c.fn);
  if (it != g_max_dyn.end() && (size_t)it->second > allowed) allowed = (size_t)it->second;
  if (nt == 0 || nt > 1024 || c.block.z > 64 || c.grid.x == 0 || c.grid.y == 0 || c.grid.z == 0 ||
      c.grid.y > 65535 || c.grid.z > 65535 || c.grid.x > 0x7fffffffu) {
    fprintf(stderr, "cuda_emu: %s: invalid launch configuration grid (%u,%u,%u) block (%u,%u,%u)\n", c.name, c.grid.x,
            c.grid.y, c.grid.z, c.block.x, c.block.y, c.block.z);
    g_findings++;
    g_last_error = cudaErrorInvalidConfiguration;
    return;
  }
  if (c.smem > allowed) {
    fprintf(stderr, "cuda_emu: %s: %zu bytes of dynamic shared memory, %zu allowed (cudaFuncSetAttribute)\n", c.name,
            c.smem, allowed);
    g_findings++;
    g_last_error = cudaErrorInvalidValue;
    return;
  }
  g_nthreads = (int)nt;
  g_block_dim = c.block, g_grid_dim = c.grid;
  g_invoke = invoke, g_args = args;
  g_failed = 0;
  for (unsigned z = 0; z < c.grid.z && !g_failed; z++)
    for (unsigned y = 0; y < c.grid.y && !g_failed; y++)
      for (unsigned x = 0; x < c.grid.x && !g_failed; x++) {
        g_block_idx.x = x, g_block_idx.y = y, g_block_idx.z = z;
        run_block();
      }
  if (g_reports_this_launch > kMaxReports)
    fprintf(stderr, "cuda_emu: %s: %d findings in all\n", c.name, g_reports_this_launch);
  g_cfg = nullptr;
}

int syncthreads_count(int pred) {
  if (!g_in_block) abort();
  g_bar_count++;
  g_bar_pred += pred != 0;
  if (g_bar_count == g_live) { // the last to arrive releases the others and goes on
    const int res = g_bar_pred;
    release_barrier();
    return res;
  }
  g_cur->state = F_BAR;
  to_sched();
  return g_cur->bar_result;
}

const uint32_t *warp_gather(unsigned mask, const void *mine, int nwords, const char *op, int orders_memory) {
  if (!g_in_block) abort();
  const int w = g_cur->lin / 32, lane = g_cur->lin % 32;
  const int nl = g_nthreads - 32 * w < 32 ? g_nthreads - 32 * w : 32;
  const unsigned full = nl == 32 ? 0xffffffffu : (1u << nl) - 1u;
  warp_state *ws = &g_w[w];
  if ((mask & full) != full || !((mask >> lane) & 1u))
    report("%s by thread %d with mask %08x: the emulation supports only the whole warp (%08x)", op, g_cur->lin, mask,
           full);
  const int slot = ws->gen & 1;
  if (nwords) memcpy(ws->buf[slot][lane], mine, 4 * (size_t)nwords);
  if (ws->count == 0)
    ws->op = op;
  else if (strcmp(ws->op, op) != 0)
    report("warp %d: lane %d at %s while other lanes wait at %s", w, lane, op, ws->op);
  if (++ws->count == nl) {
    ws->count = 0;
    ws->gen++;
    if (orders_memory) ws->mem_ep++;
    for (int l = 0; l < nl; l++)
      if (g_f[32 * w + l].state == F_WARP) g_f[32 * w + l].state = F_READY;
  } else {
    g_cur->state = F_WARP;
    to_sched();
  }
  return &ws->buf[slot][0][0];
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32: D (16x8) = A (16x16) B (16x8) + C.
// Fragments by the PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type"
// (section 9.7.14.5.8 of PTX ISA 8.x; groupID g = lane >> 2, threadID_in_group t = lane & 3;
// in each .b32 register the lower half holds the lower-indexed element):
//   A: a0,a1: (row g,   col 2t + i)      a2,a3: (row g+8, col 2t + i)
//      a4,a5: (row g,   col 2t + 8 + i)  a6,a7: (row g+8, col 2t + 8 + i)   (register r holds a2r, a2r+1)
//   B: b0,b1: (row 2t + i, col g)        b2,b3: (row 2t + 8 + i, col g)
//   C, D: c0,c1: (row g, col 2t + i)     c2,c3: (row g+8, col 2t + i)
// The product: the GPU's tensor cores multiply bf16 exactly (8-bit significands: every
// product is exact in fp32) and add the 16 products and C with an internal precision and
// order NVIDIA does not document; here they are added exactly-rounded in double in k order,
// C last, and rounded once to fp32. The bits may differ from a GPU's in the last place of
// fp32, within every bound of the tests (bf16 outputs: 1e-2 relative).
void mma_m16n8k16_bf16(float c[4], const uint32_t a[4], uint32_t b0, uint32_t b1) {
  uint32_t mine[10];
  memcpy(mine, a, 16);
  mine[4] = b0, mine[5] = b1;
  memcpy(mine + 6, c, 16);
  const uint32_t *all = warp_gather(0xffffffffu, mine, 10, "mma.sync.m16n8k16", 0);
  const int lane = g_cur->lin % 32, g = lane >> 2, t = lane & 3;
  auto bf = [](uint32_t reg, int hi) { return (double)__uint_as_float(hi ? reg & 0xffff0000u : reg << 16); };
  // A[row][k]: lane (row % 8) * 4 + (k % 8) / 2, register (row >= 8) + 2 (k >= 8), half k & 1
  auto A = [&](int row, int k) {
    return bf(all[16 * ((row & 7) * 4 + (k & 7) / 2) + (row >= 8 ? 1 : 0) + (k >= 8 ? 2 : 0)], k & 1);
  };
  // B[k][col]: lane col * 4 + (k % 8) / 2, register 4 + (k >= 8), half k & 1
  auto B = [&](int k, int col) { return bf(all[16 * (col * 4 + (k & 7) / 2) + 4 + (k >= 8 ? 1 : 0)], k & 1); };
  float d[4];
  for (int i = 0; i < 4; i++) {
    const int row = g + 8 * (i >> 1), col = 2 * t + (i & 1);
    double s = 0.0;
    for (int k = 0; k < 16; k++) s += A(row, k) * B(k, col);
    d[i] = (float)(s + (double)c[i]);
  }
  memcpy(c, d, 16);
}

} // namespace lcc_emu

// ---- the hooks of GCC's -fsanitize=kernel-address (outline mode, recovering): every load and
// store of the kernel translation units
extern "C" {
#define LCC_EMU_HOOK(n)                                                                                          \
  void __asan_load##n##_noabort(uintptr_t a) { lcc_emu::check_access(a, n, 0); }                                 \
  void __asan_store##n##_noabort(uintptr_t a) { lcc_emu::check_access(a, n, 1); }                                \
  void __asan_load##n(uintptr_t a) { lcc_emu::check_access(a, n, 0); }                                           \
  void __asan_store##n(uintptr_t a) { lcc_emu::check_access(a, n, 1); }
LCC_EMU_HOOK(1)
LCC_EMU_HOOK(2)
LCC_EMU_HOOK(4)
LCC_EMU_HOOK(8)
LCC_EMU_HOOK(16)
#undef LCC_EMU_HOOK
void __asan_loadN_noabort(uintptr_t a, size_t n) { lcc_emu::check_access(a, n, 0); }
void __asan_storeN_noabort(uintptr_t a, size_t n) { lcc_emu::check_access(a, n, 1); }
void __asan_loadN(uintptr_t a, size_t n) { lcc_emu::check_access(a, n, 0); }
void __asan_storeN(uintptr_t a, size_t n) { lcc_emu::check_access(a, n, 1); }
void __asan_handle_no_return(void) {}
}

extern "C" {
long lcc_emu_findings(void) { return lcc_emu::findings(); }
void lcc_emu_reset_findings(void) { lcc_emu::reset_findings(); }
void lcc_emu_set_order(int descending) { lcc_emu::set_order(descending); }
}
