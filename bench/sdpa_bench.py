#!/usr/bin/env python3
"""PyTorch's SDPA (flash backend) on the shapes of bench/bench_cuda_attn.c: causal, GQA 32/8
(kv heads repeated, as transformers does before SDPA), head dim 128, bf16, forward and
backward, TFLOPS by the same count (forward 4 S^2 Hq D / 2, backward 2.5x), median of 5
timed calls after one warm-up, timed with CUDA events. For tools/gpu_check.sh.
    python3 bench/sdpa_bench.py [S ...]
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def timed(fn):
    ts = []
    for _ in range(6):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        ts.append(a.elapsed_time(b) / 1e3)
    return sorted(ts[1:])[2]


def main():
    lens = [int(x) for x in sys.argv[1:]] or [8192, 32768, 131072]
    hq, hkv, d = 32, 8, 128
    print(torch.cuda.get_device_name(0), "torch", torch.__version__)
    print(f"{'S':<8} {'pass':<5} {'ms':>10} {'TFLOPS':>10}")
    for s in lens:
        q = torch.randn(1, hq, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        k = torch.randn(1, hkv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        v = torch.randn(1, hkv, s, d, device="cuda", dtype=torch.bfloat16, requires_grad=True)
        do = torch.randn(1, hq, s, d, device="cuda", dtype=torch.bfloat16)
        fl = 4.0 * s * s * hq * d / 2
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            def fwd():
                kr, vr = k.repeat_interleave(hq // hkv, 1), v.repeat_interleave(hq // hkv, 1)
                return F.scaled_dot_product_attention(q, kr, vr, is_causal=True)
            t = timed(lambda: fwd())
            print(f"{s:<8} {'fwd':<5} {t * 1e3:10.3f} {fl / t / 1e12:10.1f}")
            out = fwd()
            t = timed(lambda: torch.autograd.grad(out, (q, k, v), do, retain_graph=True))
            print(f"{s:<8} {'bwd':<5} {t * 1e3:10.3f} {2.5 * fl / t / 1e12:10.1f}")
        del q, k, v, do, out
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
