#!/usr/bin/env python3
"""One PyTorch training configuration per process: tokens/s and peak RSS of a training step.

    torch_step.py --model DIR_OR_FILE.gguf --seq S [--precision fp32|bf16] [--checkpointing]
                  [--threads 2] [--steps 3] [--mem-limit-gib G] [--seed 0] [--lora R]
    torch_step.py --convert FILE.gguf --out DIR     (GGUF -> HF directory, float32 safetensors)
    torch_step.py --gemm [--threads 2]              (torch.mm GFLOP/s, fp32 and bf16: the ceilings)

Loads the model with transformers (a GGUF file through `from_pretrained(dir, gguf_file=...)`,
which dequantizes to fp32, or an HF directory), SDPA attention, fp32 weights. A step is
forward on random token ids of length S (batch 1, labels = the ids: transformers shifts them,
so S-1 predicted tokens, as longctx's S targets), backward, gradient-norm clip 1.0 and
AdamW (lr 1e-5, betas 0.9/0.95, eps 1e-8, weight decay 0.1), zero_grad. bf16 is
`torch.autocast("cpu", dtype=torch.bfloat16)` around forward and loss (fp32 master weights,
as longctx). `--checkpointing` is transformers' gradient checkpointing (per decoder layer,
non-reentrant torch.utils.checkpoint). One warm-up step, then --steps timed steps.
`--lora R`: PEFT LoRA of rank R (lora_alpha R, dropout 0, bias none) on all seven linear
projections of every layer (PEFT's get_peft_model; the base frozen), AdamW over the adapters
alone (weight decay 0.1 on them, as longctx's matrices).

Prints one JSON line: the settings, step_seconds (each timed step), tokens_per_s (median
timed step), loss, peak_rss_bytes (getrusage ru_maxrss of this process: model load
included), load_rss_bytes (ru_maxrss before the first step) and, when the step ran out of
memory, "status": "oom" with the error. --mem-limit-gib caps the address space grown after
loading (RLIMIT_AS), so an over-large configuration fails with an allocation error here
instead of taking the machine's memory from everything else.
"""
import argparse
import json
import os
import resource
import statistics
import sys
import time


def vm_size_bytes():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    return 0


def maxrss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # kB on Linux


def load_model(path, torch, transformers):
    kw = dict(dtype=torch.float32, attn_implementation="sdpa")
    if path.endswith(".gguf"):
        d, f = os.path.split(os.path.abspath(path))
        q = transformers.AutoModelForCausalLM.from_pretrained(d, gguf_file=f, **kw)
        # transformers marks a GGUF-loaded model as quantized (not serializable); its weights
        # are already dequantized fp32, so move them into a plain model of the same config.
        cfg = q.config
        if hasattr(cfg, "quantization_config"):
            delattr(cfg, "quantization_config")
        cfg._attn_implementation = "sdpa"
        m = transformers.AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
        missing, unexpected = m.load_state_dict(q.state_dict(), strict=False)
        if [k for k in missing if k != "lm_head.weight"] or unexpected:
            raise SystemExit(f"torch_step: GGUF state does not match: missing {missing} unexpected {unexpected}")
        m.tie_weights()
        return m
    return transformers.AutoModelForCausalLM.from_pretrained(path, **kw)


def gemm_ceilings(torch):
    """Best of 5 torch.mm calls per shape and dtype: 2048^3 and the SmolLM2 MLP's
    2048x1536x576 (tokens x ffn x dim)."""
    out = {"torch": torch.__version__, "threads": torch.get_num_threads()}
    for dt, name in ((torch.float32, "fp32"), (torch.bfloat16, "bf16")):
        for m, n, k in ((2048, 2048, 2048), (2048, 1536, 576)):
            x, w = torch.randn(m, k).to(dt), torch.randn(k, n).to(dt)
            best = 1e30
            for _ in range(6):
                t0 = time.perf_counter()
                torch.mm(x, w)
                best = min(best, time.perf_counter() - t0)
            out[f"{name}_{m}x{n}x{k}_gflops"] = round(2 * m * n * k / best / 1e9, 1)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model")
    ap.add_argument("--seq", type=int)
    ap.add_argument("--precision", choices=["fp32", "bf16"], default="fp32")
    ap.add_argument("--checkpointing", action="store_true")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=3, help="timed steps after one warm-up step")
    ap.add_argument("--mem-limit-gib", type=float, default=0, help="address space allowed to grow after loading")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--convert", metavar="GGUF")
    ap.add_argument("--out")
    ap.add_argument("--gemm", action="store_true")
    ap.add_argument("--lora", type=int, default=0, help="PEFT LoRA rank on all linear projections (0: full fine-tuning)")
    a = ap.parse_args()

    os.environ.setdefault("OMP_NUM_THREADS", str(a.threads))
    import torch
    import transformers

    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)

    if a.convert:
        if not a.out:
            ap.error("--convert needs --out DIR")
        m = load_model(a.convert, torch, transformers)
        m.save_pretrained(a.out, safe_serialization=True)
        print(json.dumps({"converted": a.convert, "out": a.out,
                          "params": sum(p.numel() for p in m.parameters())}))
        return 0
    if a.gemm:
        print(json.dumps(gemm_ceilings(torch)))
        return 0
    if not a.model or not a.seq:
        ap.error("--model and --seq are required")

    res = {"impl": "pytorch", "torch": torch.__version__, "transformers": transformers.__version__,
           "model": a.model, "seq": a.seq, "precision": a.precision,
           "checkpoint": "layer" if a.checkpointing else "none", "threads": torch.get_num_threads(),
           "attn": "sdpa", "status": "ok"}
    t_load = time.time()
    model = load_model(a.model, torch, transformers)
    model.config.use_cache = False
    model.train()
    if a.checkpointing:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
    if a.lora:
        import peft
        cfg = peft.LoraConfig(r=a.lora, lora_alpha=a.lora, lora_dropout=0.0, bias="none", task_type="CAUSAL_LM",
                              target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])
        if a.checkpointing:
            model.enable_input_require_grads()  # so checkpointed layers see a grad-requiring input
        model = peft.get_peft_model(model, cfg)
        res["lora"] = a.lora
        res["peft"] = peft.__version__
        res["trainable_params"] = sum(p.numel() for p in model.parameters() if p.requires_grad)
    res["load_seconds"] = time.time() - t_load
    res["params"] = sum(p.numel() for p in model.parameters())
    res["attn_implementation"] = model.config._attn_implementation

    decay = [p for n, p in model.named_parameters() if p.dim() >= 2 and p.requires_grad]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2 and p.requires_grad]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-5, betas=(0.9, 0.95), eps=1e-8)
    g = torch.Generator().manual_seed(a.seed)
    ids = torch.randint(0, model.config.vocab_size, (1, a.seq), generator=g)
    res["load_rss_bytes"] = maxrss_bytes()

    if a.mem_limit_gib > 0:
        lim = vm_size_bytes() + int(a.mem_limit_gib * (1 << 30))
        resource.setrlimit(resource.RLIMIT_AS, (lim, lim))
        res["mem_limit_gib"] = a.mem_limit_gib

    def step():
        t0 = time.perf_counter()
        if a.precision == "bf16":
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = model(input_ids=ids, labels=ids).loss
        else:
            loss = model(input_ids=ids, labels=ids).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return time.perf_counter() - t0, float(loss)

    times, losses = [], []
    try:
        for i in range(1 + a.steps):
            dt, loss = step()
            print(f"torch_step: step {i} {'(warm-up) ' if i == 0 else ''}{dt:.2f} s loss {loss:.4f}",
                  file=sys.stderr, flush=True)
            losses.append(loss)
            if i > 0:
                times.append(dt)
    except (RuntimeError, MemoryError) as e:  # DefaultCPUAllocator: can't allocate memory
        msg = str(e).splitlines()[0] if str(e) else type(e).__name__
        if "alloc" not in msg.lower() and not isinstance(e, MemoryError):
            raise
        res["status"] = "oom"
        res["error"] = msg[:300]
    if times:
        res["step_seconds"] = times
        res["tokens_per_s"] = a.seq / statistics.median(times)
    if losses:
        res["loss"] = losses
    res["peak_rss_bytes"] = maxrss_bytes()
    print(json.dumps(res), flush=True)
    return 0 if res["status"] == "ok" else 3


if __name__ == "__main__":
    sys.exit(main())
