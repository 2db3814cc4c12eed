#!/usr/bin/env python3
"""A token file of documents with long-tailed lengths (for bench/bench_pack.sh): 70% of the
documents 128..2K tokens, 25% 2K..16K, 5% 16K..48K, random byte tokens (vocab 256), with a
document index (version 2). Usage: make_doc_mix.py OUT TOTAL_TOKENS [SEED]"""
import random
import struct
import sys

out, total = sys.argv[1], int(sys.argv[2])
rng = random.Random(int(sys.argv[3]) if len(sys.argv) > 3 else 1)
starts, n = [], 0
while n < total:
    u = rng.random()
    lo, hi = (128, 2048) if u < 0.70 else (2048, 16384) if u < 0.95 else (16384, 49152)
    starts.append(n)
    n += rng.randint(lo, hi)
toks = bytes(rng.getrandbits(8) for _ in range(n))
with open(out, "wb") as f:
    f.write(b"LCTOKENS" + struct.pack("<IIIIQ", 2, 2, 256, 1, n))
    f.write(b"".join(struct.pack("<H", t) for t in toks))
    f.write(struct.pack("<Q", len(starts)) + struct.pack(f"<{len(starts)}Q", *starts))
lens = [b - a for a, b in zip(starts, starts[1:] + [n])]
print(f"{out}: {n} tokens, {len(starts)} documents, median {sorted(lens)[len(lens) // 2]}, "
      f"{sum(l > 16384 for l in lens)} over 16K")
