// libFuzzer target: arbitrary bytes as a hardware description (hardware/*.json) through
// lc_rates_load_hardware. Accepted: rates the time model can price with
// (fuzz_rates_check.h), at least one device per node and a memory size; refused: one line.
#include <stdint.h>

#include "fuzz_rates_check.h"
#include "fuzz_util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const char *path = lc_fuzz_put("hardware.json", data, size);
  static lc_rates r;
  lc_status st = lc_rates_load_hardware(path, &r);
  if (st != LC_OK) {
    lc_fuzz_refused(st);
    return 0;
  }
  if (r.devices_per_node < 1 || !lc_fuzz_pos(r.mem_bytes) || !lc_fuzz_pos(r.inter.bw)) LC_FUZZ_TRAP();
  lc_fuzz_check_rates(&r);
  return 0;
}
