// The backend interface (backend/backend.h): every op of the CPU and the private backend
// against the kernel table on host arrays (the path the step used before the interface) and
// a double reference, on random inputs in views that leave poisoned elements around them;
// memory by category per device; the named reads and writes; the optimizer step on both
// backends bit for bit (backend_update.h); one training step's synchronisation points.
#include <string.h>

#include "backend/backend.h"
#include "backend/private/private_backend.h"
#include "comm/comm.h"
#include "train/trainer.h"
#include "backend_update.h"
#include "testutil.h"

#define N 1037   // odd: no kernel's vector width divides it
#define PAD 29   // poisoned elements before and after each view

static void fill(float *x, size_t n, lc_rng *r) {
  for (size_t i = 0; i < n; i++) x[i] = lc_rng_normal(r);
}

// A buffer of PAD + n + PAD fp32 values holding poison (or the given values) and its middle view.
typedef struct {
  lc_buf all, mid;
} padded;

static padded make(lc_backend *be, lc_dtype dt, const void *vals, size_t n) {
  padded p;
  CHECK(lc_buf_alloc(be, LC_MEM_SCRATCH, dt, n + 2 * PAD, 0, "test buffer", &p.all) == LC_OK, "alloc: %s", lc_errmsg());
  const size_t es = lc_dtype_size(dt);
  unsigned char *h = malloc(es * (n + 2 * PAD));
  memset(h, 0x7f, es * (n + 2 * PAD)); // poison: huge finite values in every dtype
  if (vals) memcpy(h + es * PAD, vals, es * n);
  CHECK(lc_buf_write(p.all, h, LC_SYNC_TEST) == LC_OK, "write");
  free(h);
  p.mid = lc_buf_view(p.all, PAD, n);
  return p;
}

// Reads the middle back and checks the poison around it stayed.
static void read_mid(padded *p, void *out, const char *what) {
  const size_t es = lc_dtype_size(p->all.dt), n = p->mid.n;
  unsigned char *h = malloc(es * (n + 2 * PAD));
  CHECK(lc_buf_read(p->all, h, LC_SYNC_TEST) == LC_OK, "read");
  int spill = 0;
  for (size_t i = 0; i < es * PAD; i++) spill += h[i] != 0x7f || h[es * (PAD + n) + i] != 0x7f;
  CHECK(spill == 0, "%s: %d poisoned bytes outside the view changed", what, spill);
  memcpy(out, h + es * PAD, es * n);
  free(h);
  lc_buf_free(&p->all);
}

static int same(const void *a, const void *b, size_t bytes) { return memcmp(a, b, bytes) == 0; }

static void test_ops(const char *dev) {
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_backend *be = NULL;
  CHECK(lc_backend_open(dev, &ar, &be) == LC_OK, "open %s: %s", dev, lc_errmsg());
  lc_rng r;
  lc_rng_seed(&r, 42);
  float x[N], y[N], m[N], v[N], want[N], got[N], want2[N], want3[N], want4[N];
  uint16_t h16[N], got16[N];
  fill(x, N, &r), fill(y, N, &r), fill(m, N, &r);
  for (int i = 0; i < N; i++) v[i] = fabsf(lc_rng_normal(&r));
  const lc_kernels *k = lc_kern();

  // add, scale
  padded py = make(be, LC_DT_F32, y, N), px = make(be, LC_DT_F32, x, N);
  CHECK(lc_be_add(py.mid, px.mid) == LC_OK, "add");
  memcpy(want, y, sizeof y);
  k->add(want, x, N);
  read_mid(&py, got, "add");
  CHECK(same(got, want, sizeof got), "%s add: not the kernel table's bits", dev);
  double worst = 0;
  for (int i = 0; i < N; i++) worst = fmax(worst, fabs((double)got[i] - ((double)y[i] + x[i])));
  CHECK(worst <= 4e-7 * 8, "%s add vs double: %g", dev, worst); // one rounding of |y + x| <= 8
  py = make(be, LC_DT_F32, y, N);
  CHECK(lc_be_scale(py.mid, 0.37f) == LC_OK, "scale");
  memcpy(want, y, sizeof y);
  k->scale(want, N, 0.37f);
  read_mid(&py, got, "scale");
  CHECK(same(got, want, sizeof got), "%s scale", dev);

  // sum of squares into a double on the device, then one named read
  lc_buf acc;
  CHECK(lc_buf_alloc(be, LC_MEM_SCRATCH, LC_DT_F64, 1, 1, "acc", &acc) == LC_OK, "acc");
  CHECK(lc_be_sumsq_acc(acc, px.mid) == LC_OK && lc_be_sumsq_acc(acc, lc_buf_view(px.mid, 3, 500)) == LC_OK, "sumsq");
  double s = 0, sref = k->sumsq(x, N) + k->sumsq(x + 3, 500), dref = 0;
  CHECK(lc_buf_read(acc, &s, LC_SYNC_GRAD_NORM) == LC_OK, "read acc");
  for (int i = 0; i < N; i++) dref += (double)x[i] * x[i];
  for (int i = 3; i < 503; i++) dref += (double)x[i] * x[i];
  CHECK(same(&s, &sref, sizeof s), "%s sumsq: %.17g vs the kernel table's %.17g", dev, s, sref);
  CHECK(fabs(s - dref) <= 1e-12 * dref, "%s sumsq vs double: %.17g vs %.17g", dev, s, dref);
  lc_buf_free(&acc);
  read_mid(&px, got, "sumsq input");
  CHECK(same(got, x, sizeof got), "%s: sumsq left its input", dev);

  // casts: pack / unpack / round
  padded p32 = make(be, LC_DT_F32, x, N), p16 = make(be, LC_DT_BF16, NULL, N);
  CHECK(lc_be_bf16_pack(p16.mid, p32.mid) == LC_OK, "pack");
  read_mid(&p16, got16, "pack");
  k->bf16_pack(h16, x, N);
  CHECK(same(got16, h16, sizeof h16), "%s bf16 pack", dev);
  int badcast = 0;
  for (int i = 0; i < N; i++) badcast += got16[i] != lc_f32_to_bf16(x[i]);
  CHECK(badcast == 0, "%s bf16 pack vs the scalar rule: %d", dev, badcast);
  p16 = make(be, LC_DT_BF16, h16, N);
  padded q32 = make(be, LC_DT_F32, NULL, N);
  CHECK(lc_be_bf16_unpack(q32.mid, p16.mid) == LC_OK, "unpack");
  read_mid(&q32, got, "unpack");
  badcast = 0;
  for (int i = 0; i < N; i++) badcast += got[i] != lc_bf16_to_f32(h16[i]);
  CHECK(badcast == 0, "%s bf16 unpack: %d", dev, badcast);
  read_mid(&p16, got16, "unpack input");
  CHECK(lc_be_bf16_round(p32.mid) == LC_OK, "round");
  read_mid(&p32, got, "round");
  badcast = 0;
  for (int i = 0; i < N; i++) badcast += got[i] != lc_bf16_to_f32(h16[i]);
  CHECK(badcast == 0, "%s bf16 round: %d", dev, badcast);

  // copy and zero (copy across two views of one allocation too)
  padded pc = make(be, LC_DT_F32, NULL, N);
  px = make(be, LC_DT_F32, x, N);
  CHECK(lc_be_copy(pc.mid, px.mid, LC_STREAM_COPY) == LC_OK && lc_be_sync(be, LC_STREAM_COPY) == LC_OK, "copy");
  read_mid(&pc, got, "copy");
  CHECK(same(got, x, sizeof x), "%s copy", dev);
  CHECK(lc_be_zero(lc_buf_view(px.mid, 100, 200)) == LC_OK, "zero");
  read_mid(&px, got, "zero");
  memcpy(want, x, sizeof x);
  memset(want + 100, 0, 200 * sizeof(float));
  CHECK(same(got, want, sizeof got), "%s zero of a view", dev);

  // AdamW over a shard
  padded pp = make(be, LC_DT_F32, x, N), pg = make(be, LC_DT_F32, y, N), pm = make(be, LC_DT_F32, m, N),
         pv = make(be, LC_DT_F32, v, N);
  lc_adamw_args a = {.wd = 0.1f, .beta1 = 0.9f, .beta2 = 0.95f, .eps = 1e-8f, .lr = 1e-2f, .step_size = 0.05f,
                     .inv_sqrt_bc2 = 3.0f};
  CHECK(lc_be_adamw(pp.mid, pg.mid, pm.mid, pv.mid, &a) == LC_OK, "adamw");
  memcpy(want, x, sizeof x), memcpy(want2, y, sizeof y), memcpy(want3, m, sizeof m), memcpy(want4, v, sizeof v);
  k->adamw(want, want2, want3, want4, N, a.wd, a.beta1, a.beta2, a.eps, a.lr, a.step_size, a.inv_sqrt_bc2);
  read_mid(&pp, got, "adamw p");
  CHECK(same(got, want, sizeof got), "%s adamw p", dev);
  worst = 0;
  for (int i = 0; i < N; i++) { // double reference of the entry's formula (kernels.h)
    double mm = 0.9 * m[i] + 0.1 * y[i], vv = 0.95 * v[i] + 0.05 * (double)y[i] * y[i];
    double p = x[i] - 1e-2 * 0.1 * x[i] - 0.05 * mm / (sqrt(vv) * 3.0 + 1e-8);
    worst = fmax(worst, fabs(got[i] - p) / (1e-3 + fabs(p)));
  }
  CHECK(worst <= 1e-5, "%s adamw vs double: %g", dev, worst);
  read_mid(&pm, got, "adamw m");
  CHECK(same(got, want3, sizeof got), "%s adamw m", dev);
  read_mid(&pv, got, "adamw v");
  CHECK(same(got, want4, sizeof got), "%s adamw v", dev);
  read_mid(&pg, got, "adamw g");
  CHECK(same(got, y, sizeof got), "%s adamw left g", dev);

  // Wrong buffers are one line, not a crash
  padded w16 = make(be, LC_DT_BF16, NULL, 10), w32 = make(be, LC_DT_F32, NULL, 11);
  CHECK(lc_be_add(w32.mid, w16.mid) == LC_EINVAL && strstr(lc_errmsg(), "add"), "dtype mismatch refused");
  CHECK(lc_be_bf16_pack(w16.mid, w32.mid) == LC_EINVAL, "size mismatch refused");
  lc_buf_free(&w16.all), lc_buf_free(&w32.all);

  // Memory: every byte counted in the device's arena, by category; a cap refuses cleanly
  CHECK(be->arena->cur_total == 0, "%s: every buffer freed (%zu left)", dev, be->arena->cur_total);
  lc_buf big;
  CHECK(lc_buf_alloc(be, LC_MEM_GRADS, LC_DT_F32, 1000, 1, "grads", &big) == LC_OK, "alloc");
  CHECK(be->arena->cur[LC_MEM_GRADS] == 4000 && be->arena->peak[LC_MEM_SCRATCH] > 0, "%s: counted by category", dev);
  CHECK(be->host_memory ? be->arena == &ar : ar.cur_total == 0, "%s: device bytes apart from the host's", dev);
  lc_buf_free(&big);
  CHECK(!lc_buf_ok(big), "freed buffer emptied");
  lc_backend_close(be);
  lc_arena_trim(&ar);

  lc_arena capped;
  lc_arena_init(&capped, 1 << 20);
  CHECK(lc_backend_open(dev, &capped, &be) == LC_OK, "open capped");
  CHECK(lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, 1 << 20, 0, "a too-large buffer", &big) == LC_ENOMEM &&
            strstr(lc_errmsg(), "a too-large buffer") && !lc_buf_ok(big),
        "%s: the cap refuses with the buffer's name: %s", dev, lc_errmsg());
  lc_backend_close(be);
}

// The private backend hands out no address and opens its mapping only inside its calls.
static void test_private(void) {
  lc_arena ar;
  lc_arena_init(&ar, 0);
  lc_backend *be = NULL;
  CHECK(lc_backend_open("private", &ar, &be) == LC_OK, "open");
  lc_buf b;
  CHECK(lc_buf_alloc(be, LC_MEM_PARAMS, LC_DT_F32, 64, 1, "p", &b) == LC_OK, "alloc");
  CHECK(lc_buf_host(b) == NULL && lc_buf_host_or_fail(b, "the layer") == NULL && strstr(lc_errmsg(), "private"),
        "no host address: %s", lc_errmsg());
  const size_t before = lc_backend_private_opens(be);
  float z[64];
  CHECK(lc_buf_read(b, z, LC_SYNC_TEST) == LC_OK && z[0] == 0 && z[63] == 0, "zeroed at allocation");
  CHECK(lc_backend_private_opens(be) == before + 1, "one read opens the mapping once");
  // allocations reuse freed space (first fit, merged neighbours)
  lc_buf c, d;
  CHECK(lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, 1000, 0, "c", &c) == LC_OK, "c");
  const uint64_t hc = c.h;
  lc_buf_free(&c);
  CHECK(lc_buf_alloc(be, LC_MEM_ACT, LC_DT_F32, 900, 0, "d", &d) == LC_OK && d.h == hc, "freed space reused");
  lc_buf_free(&d);
  lc_buf_free(&b);
  CHECK(be->arena->cur_total == 0 && ar.cur_total == 0, "all freed");
  lc_backend_close(be);
}

// Devices the program accepts, and the one line for the rest.
static void test_devices(void) {
  CHECK(lc_device_check("cpu") == LC_OK && lc_device_check("private") == LC_OK, "cpu, private");
  CHECK(lc_device_check("cuda:0") == LC_EINVAL && strstr(lc_errmsg(), "no CUDA backend"), "cuda: %s", lc_errmsg());
  CHECK(lc_device_check("tpu") == LC_EINVAL && strstr(lc_errmsg(), "cpu"), "unknown names the choices: %s", lc_errmsg());
}

// The optimizer step on both backends, one process: every stage (a self communicator for
// the sharded ones, Z = 1).
static void test_update(void) {
  lc_comm *self = NULL;
  lc_comm_self(&self);
  lc_config c;
  lc_config_preset(&c, "tiny");
  size_t n = lc_t_backend_update(&c, 0, 0, NULL, "local stage 0");
  CHECK(n > 100000, "compared %zu values", n);
  for (int stage = 1; stage <= 3; stage++) {
    char tag[32];
    snprintf(tag, sizeof tag, "self stage %d", stage);
    lc_t_backend_update(&c, stage, 1, self, tag);
  }
  lc_comm_destroy(self);
}

// One training step's synchronisation points (the expected set: a hidden read fails it).
// Step = zero the gradients, the passes, the update: the norm's accumulator is written
// (zeroed) and read once; nothing else crosses between the backend and the host. (The loss
// sum and the passes' data do not go through the backend yet: issue 32.)
static void test_step_syncs(void) {
  lc_train_opts o;
  lc_train_opts_init(&o);
  lc_config_preset(&o.cfg, "tiny");
  o.data_spec = "task:copy";
  o.seq = 64, o.batch = 2, o.steps = 3, o.warmup = 0, o.lr = 1e-3f, o.lr_min = 1e-3f, o.clip = 1.0f, o.seed = 3;
  lc_comm *self = NULL;
  lc_comm_self(&self);
  lc_trainer tr;
  CHECK(lc_trainer_init(&tr, &o, self) == LC_OK, "init: %s", lc_errmsg());
  CHECK(tr.be && tr.model.ps.be == tr.be && !strcmp(tr.be->name, "cpu"), "the trainer's states live on its backend");
  lc_backend_sync_reset(tr.be);
  lc_step_metrics m;
  CHECK(lc_trainer_step(&tr, &m) == LC_OK, "step: %s", lc_errmsg());
  for (int k = 0; k < LC_SYNC_N; k++) {
    const size_t want_r = k == LC_SYNC_GRAD_NORM, want_w = k == LC_SYNC_GRAD_NORM;
    CHECK(tr.be->sync[k][0] == want_r && tr.be->sync[k][1] == want_w, "one step: %s reads %zu writes %zu, expected %zu %zu",
          lc_sync_name((lc_sync_kind)k), tr.be->sync[k][0], tr.be->sync[k][1], want_r, want_w);
  }
  CHECK(tr.be->sync_bytes[LC_SYNC_GRAD_NORM] == 2 * sizeof(double), "the norm: 2 x 8 bytes");
  lc_trainer_free(&tr);
  // --device private is refused for training with one line (the passes need host memory yet)
  o.device = "private";
  CHECK(lc_trainer_init(&tr, &o, self) == LC_EINVAL && strstr(lc_errmsg(), "--device private"), "private train: %s",
        lc_errmsg());
  lc_comm_destroy(self);
}

int main(void) {
  test_devices();
  test_ops("cpu");
  test_ops("private");
  test_private();
  test_update();
  test_step_syncs();
  return lc_test_finish("test_backend");
}
