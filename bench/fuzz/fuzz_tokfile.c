// libFuzzer target: arbitrary bytes through the token-file reader (in memory), versions 1
// to 3: the document index (versions 2, 3) and the loss mask (version 3). A file that opens
// is what io/tokfile.h promises: a known version and dtype, tokens that fill the file (plus
// a version 3 file's mask, one 0/1 byte per token right after the tokens, and the index of a
// file with its flag), documents that start at 0, in strictly increasing order, inside the
// tokens; the vocab check agrees with a scan. A refused file leaves one line.
#include <stdint.h>
#include <string.h>

#include "fuzz_util.h"
#include "io/tokfile.h"

static uint32_t rd32(const uint8_t *b) { return b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  lc_tokfile t;
  lc_status st = lc_tokfile_open_mem(&t, data, size, "fuzz");
  if (st != LC_OK) {
    lc_fuzz_refused(st);
    return 0;
  }
  if (t.version < 1 || t.version > 3) LC_FUZZ_TRAP();
  if (t.bytes_per_token != 2 && t.bytes_per_token != 4) LC_FUZZ_TRAP();
  if (t.count == 0 || t.vocab == 0 || (t.bytes_per_token == 2 && t.vocab > 65536)) LC_FUZZ_TRAP();
  if (t.toks != data + LC_TOKFILE_HEADER) LC_FUZZ_TRAP();
  const int flagged = t.version >= 2 && (rd32(data + 20) & LC_TOKFILE_HAS_DOCS);
  if (!flagged && t.n_docs) LC_FUZZ_TRAP();
  const uint64_t tok_end = LC_TOKFILE_HEADER + t.count * t.bytes_per_token;
  const uint64_t mask_end = tok_end + (t.version == 3 ? t.count : 0);
  if ((t.version == 3) != (t.mask != NULL) || (t.mask && t.mask != data + tok_end)) LC_FUZZ_TRAP();
  for (uint64_t i = 0; t.mask && i < t.count; i++)
    if (t.mask[i] > 1 || lc_tokfile_counts(&t, i) != t.mask[i]) LC_FUZZ_TRAP();
  const uint64_t want = mask_end + (flagged ? 8 + 8 * t.n_docs : 0);
  if (want != size || (flagged && (t.n_docs == 0 || t.docs != data + mask_end + 8))) LC_FUZZ_TRAP();
  for (uint64_t i = 0; i < t.n_docs; i++) {
    const uint64_t s = lc_tokfile_doc_start(&t, i), e = lc_tokfile_doc_end(&t, i);
    if ((i == 0 && s != 0) || s >= e || e > t.count) LC_FUZZ_TRAP();
    if (i + 1 < t.n_docs ? e != lc_tokfile_doc_start(&t, i + 1) : e != t.count) LC_FUZZ_TRAP();
  }
  uint32_t max = 0;
  for (uint64_t i = 0; i < t.count; i++) {
    const uint32_t v = lc_tokfile_get(&t, i);
    if (v > max) max = v;
  }
  static const int vocabs[] = {1, 256, 32000, 65536, 128256};
  for (size_t i = 0; i < sizeof vocabs / sizeof vocabs[0]; i++) {
    const int ok = t.vocab <= (uint32_t)vocabs[i] && max < (uint32_t)vocabs[i];
    st = lc_tokfile_check_vocab(&t, vocabs[i]);
    if (ok != (st == LC_OK)) LC_FUZZ_TRAP();
    if (!ok) lc_fuzz_refused(st);
  }
  lc_tokfile_close(&t);
  return 0;
}
