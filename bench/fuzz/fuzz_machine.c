// libFuzzer target: arbitrary bytes as a machine file (what `longctx calibrate` writes)
// through lc_rates_load_machine, for a run of the profile's shape and for another (the
// nearest profile, scaled). Accepted: rates the time model can price with (fuzz_rates_check.h)
// and profile ranks and threads >= 1; refused: one line.
#include <stdint.h>

#include "fuzz_rates_check.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = lc_fuzz_put("machine.json", data, size);
  static const int shapes[2][2] = {{1, 2}, {8, 1}};
  for (int s = 0; s < 2; s++) {
    static lc_rates r;
    lc_status st = lc_rates_load_machine(path, shapes[s][0], shapes[s][1], &r);
    if (st != LC_OK) {
      lc_fuzz_refused(st);
      continue;
    }
    if (r.ranks < 1 || r.threads < 1) LC_FUZZ_TRAP();
    lc_fuzz_check_rates(&r);
  }
  return 0;
}
