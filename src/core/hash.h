// A fast streaming 64-bit checksum for files (checkpoint integrity): bytes in, 8 at a time
// through a multiply-rotate round, the tail and the length mixed in at the end (a
// splitmix64 finaliser). Not cryptographic: it detects damage, not tampering.
#ifndef LC_HASH_H
#define LC_HASH_H

#include <stddef.h>
#include <stdint.h>

typedef struct {
  uint64_t acc, len;
  unsigned char tail[8];
  int ntail;
} lc_hash64;

void lc_hash64_init(lc_hash64 *h);
void lc_hash64_update(lc_hash64 *h, const void *data, size_t n);
uint64_t lc_hash64_final(const lc_hash64 *h);
// The hash of a whole buffer.
uint64_t lc_hash64_of(const void *data, size_t n);

#endif
