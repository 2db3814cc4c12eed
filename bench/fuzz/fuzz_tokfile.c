// libFuzzer target: arbitrary bytes through the token-file reader (in memory).
#include <stdint.h>
#include <string.h>

#include "io/tokfile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_tokfile t;
  if (lc_tokfile_open_mem(&t, data, size, "fuzz") != LC_OK) {
    const char *m = lc_errmsg();
    if (!m[0] || strchr(m, '\n')) __builtin_trap();
    return 0;
  }
  if (t.count == 0 || LC_TOKFILE_HEADER + t.count * t.bytes_per_token != size) __builtin_trap();
  uint32_t last = lc_tokfile_get(&t, t.count - 1), first = lc_tokfile_get(&t, 0);
  (void)last;
  (void)first;
  static const int vocabs[] = {1, 256, 32000, 65536, 128256};
  for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
    lc_status st = lc_tokfile_check_vocab(&t, vocabs[i]);
    if (st != LC_OK && !strstr(lc_errmsg(), "vocab")) __builtin_trap();
  }
  lc_tokfile_close(&t);
  return 0;
}
