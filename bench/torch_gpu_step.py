#!/usr/bin/env python3
"""The GPU peer for tools/gpu_check.sh: PyTorch + transformers training steps on one GPU.

    torch_gpu_step.py --make smollm2-135m|llama-3.2-1b --out DIR   (an HF directory with random
                                                                  fp32 weights, seed 0, for both)
    torch_gpu_step.py --model DIR --seq S [--steps 3] [--no-checkpointing]

A step: forward on random token ids of length S (batch 1, labels = the ids), backward,
clip 1.0, AdamW (lr 1e-5, betas 0.9/0.95, eps 1e-8, weight decay 0.1), zero_grad; bf16
autocast around forward and loss (fp32 master weights, as longctx --precision bf16), SDPA
attention (flash on this GPU), transformers' gradient checkpointing per decoder layer unless
--no-checkpointing. One warm-up step, then --steps timed steps (CUDA synchronised). Prints one
JSON line: tokens_per_s (median), step_seconds, peak_device_bytes (torch.cuda.max_memory_allocated),
TFLOPS by the Megatron-LM formula ALST uses (recomputed forward counted when checkpointing).
"""
import argparse
import json
import statistics
import sys
import time

SHAPES = {
    # name: hidden, intermediate, layers, heads, kv heads, vocab, rope theta, tied
    "smollm2-135m": (576, 1536, 30, 9, 3, 49152, 100000.0, True),
    "llama-3.2-1b": (2048, 8192, 16, 32, 8, 128256, 500000.0, True),
}


def megatron_flops(cfg, seq, recompute):
    # per token: 2 * params-ish of the matmuls (fwd), x3 with backward, +1 forward recomputed;
    # attention 2 * 2 * S * h (QK^T and PV, causal counted whole as Megatron does)
    h, f, L, v = cfg.hidden_size, cfg.intermediate_size, cfg.num_hidden_layers, cfg.vocab_size
    kvh = cfg.num_key_value_heads * (h // cfg.num_attention_heads)
    per_layer = 2 * (h * h + 2 * h * kvh + h * h + 3 * h * f) + 2 * 2 * seq * h
    fwd = seq * (L * per_layer + 2 * h * v)
    return fwd * (4 if recompute else 3)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--make", choices=sorted(SHAPES))
    ap.add_argument("--out")
    ap.add_argument("--model")
    ap.add_argument("--seq", type=int)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--no-checkpointing", action="store_true")
    a = ap.parse_args()
    import torch
    import transformers

    if a.make:
        h, f, L, nh, kv, v, theta, tied = SHAPES[a.make]
        cfg = transformers.LlamaConfig(hidden_size=h, intermediate_size=f, num_hidden_layers=L, num_attention_heads=nh,
                                       num_key_value_heads=kv, vocab_size=v, rope_theta=theta, tie_word_embeddings=tied,
                                       max_position_embeddings=1 << 20, rms_norm_eps=1e-5)
        torch.manual_seed(0)
        m = transformers.LlamaForCausalLM(cfg)
        m.save_pretrained(a.out, safe_serialization=True)
        print(json.dumps({"made": a.make, "out": a.out, "params": sum(p.numel() for p in m.parameters())}))
        return 0
    if not a.model or not a.seq:
        ap.error("--model and --seq are required (or --make NAME --out DIR)")
    model = transformers.AutoModelForCausalLM.from_pretrained(a.model, torch_dtype=torch.float32,
                                                              attn_implementation="sdpa").cuda()
    model.config.use_cache = False
    model.train()
    ck = not a.no_checkpointing
    if ck:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-5, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, model.config.vocab_size, (1, a.seq), generator=g).cuda()
    res = {"impl": "pytorch", "torch": torch.__version__, "transformers": transformers.__version__,
           "gpu": torch.cuda.get_device_name(0), "model": a.model, "seq": a.seq, "checkpointing": ck, "status": "ok"}

    def step():
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        torch.cuda.synchronize()
        return time.perf_counter() - t0, float(loss)

    times = []
    try:
        for i in range(1 + a.steps):
            dt, loss = step()
            if i:
                times.append(dt)
    except torch.cuda.OutOfMemoryError as e:
        res["status"] = "oom"
        res["error"] = str(e).splitlines()[0][:300]
    if times:
        med = statistics.median(times)
        res["step_seconds"] = times
        res["tokens_per_s"] = a.seq / med
        res["tflops"] = megatron_flops(model.config, a.seq, ck) / med / 1e12
    res["peak_device_bytes"] = torch.cuda.max_memory_allocated()
    print(json.dumps(res), flush=True)
    return 0 if res["status"] == "ok" else 3


if __name__ == "__main__":
    sys.exit(main())
