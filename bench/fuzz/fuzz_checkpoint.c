// libFuzzer target: a checkpoint's small files. Input: trainer_state.json, then optionally a
// NUL byte and checksums.json; the other files of a checkpoint (full and LoRA) are fixed
// bytes written once. trainer_state.json goes through lc_checkpoint_read_state (accepted:
// counts in range, strings present), the directory through lc_checkpoint_verify and
// lc_checkpoint_resolve (verified: checksums.json names every file with its size and
// checksum; without one: accepted, not verified, said in the note). Refused: one line.
#include <stdint.h>
#include <string.h>

#include "core/hash.h"
#include "fuzz_util.h"
#include "train/checkpoint.h"

// The fixed files (the seed script, bench/fuzz/seeds.py, writes checksums of the same bytes).
static const char *const fixed[][2] = {{"config.json", "{\"fuzz\": 1}\n"},
                                       {"model.safetensors", "model"},
                                       {"optimizer.safetensors", "optimizer"},
                                       {"adapter_config.json", "{\"peft_type\": \"LORA\"}\n"},
                                       {"adapter_model.safetensors", "adapter"}};

// Whether checksums.json (sums, n bytes; NULs and other control bytes are blanks to cJSON)
// holds the checksum of those bytes.
static int has_checksum(const char *sums, size_t sn, const void *bytes, size_t n) {
  char hex[32];
  snprintf(hex, sizeof hex, "%016llx", (unsigned long long)lc_hash64_of(bytes, n));
  for (size_t i = 0; i + 16 <= sn; i++)
    if (!memcmp(sums + i, hex, 16)) return 1;
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static int ready;
  if (!ready) {
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) lc_fuzz_put(fixed[i][0], fixed[i][1], strlen(fixed[i][1]));
    ready = 1;
  }
  const uint8_t *nul = memchr(data, 0, size);
  const size_t slen = nul ? (size_t)(nul - data) : size;
  const char *dir = lc_fuzz_dir();
  const char *path = lc_fuzz_put("trainer_state.json", data, slen);
  lc_ckpt_state s;
  lc_status st = lc_checkpoint_read_state(path, &s);
  if (st == LC_OK) {
    if (s.step < 0 || s.seq < 1 || s.batch < 1 || (s.pack != 0 && s.pack != 1) || !s.seed || !s.data ||
        s.next_sample > (1ull << 53))
      LC_FUZZ_TRAP();
    lc_checkpoint_state_free(&s);
  } else {
    lc_fuzz_refused(st);
  }
  const char *sums = nul ? (const char *)nul + 1 : "";
  const size_t sn = nul ? size - slen - 1 : 0;
  if (nul) {
    lc_fuzz_put("checksums.json", sums, sn);
  } else {
    lc_fuzz_drop("checksums.json");
  }
  int verified = -1;
  st = lc_checkpoint_verify(dir, &verified);
  if (st != LC_OK) {
    if (!nul) LC_FUZZ_TRAP(); // without checksums.json there is nothing to refuse
    lc_fuzz_refused(st);
  } else if (!nul) {
    if (verified != 0) LC_FUZZ_TRAP();
  } else {
    // Verified: every file of the list (full or LoRA) has its checksum in the file.
    if (verified != 1 || !has_checksum(sums, sn, data, slen) || !has_checksum(sums, sn, fixed[0][1], strlen(fixed[0][1])) ||
        !has_checksum(sums, sn, fixed[2][1], strlen(fixed[2][1])) ||
        !(has_checksum(sums, sn, fixed[1][1], strlen(fixed[1][1])) || has_checksum(sums, sn, fixed[4][1], strlen(fixed[4][1]))))
      LC_FUZZ_TRAP();
  }
  char out[4096], note[512];
  lc_status rs = lc_checkpoint_resolve(dir, out, sizeof out, note, sizeof note);
  if ((rs == LC_OK) != (st == LC_OK) || (rs == LC_OK && (strcmp(out, dir) || (verified == 0) != (note[0] != 0)))) LC_FUZZ_TRAP();
  if (rs != LC_OK) lc_fuzz_refused(rs);
  return 0;
}
