#!/usr/bin/env python3
"""A token file (version 2, uint16, no document index) of 2^17 random ids below 49152
(SmolLM2's vocabulary), seed 1234: the benchmarks' data (bench/smollm2_vs_torch.sh,
bench/lora_bench.sh).   random_tokens.py OUT"""
import array, random, struct, sys
n, V = 1 << 17, 49152
r = random.Random(1234)
a = array.array("H", (r.randrange(V) for _ in range(n)))
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<8sIIIIQ", b"LCTOKENS", 2, 2, V, 0, n))
    f.write(a.tobytes())
