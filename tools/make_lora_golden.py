#!/usr/bin/env python3
"""Golden data for LoRA, produced by PEFT + transformers in float64.

For three of the committed golden base models (tests/data/golden_untied: Llama with GQA;
golden_qwen2: q/k/v biases; golden_qwen3: q/k norms, head_dim 24, tied) this script wraps
the model in a PEFT LoRA (r 4, lora_alpha 8: scale 2; all seven projections; rsLoRA on
the Qwen3 case: scale 8/sqrt(4) = 4), sets both A and B to random values (PEFT's own
init has B = 0, which would leave A's gradient zero and hide half the backward), saves
the adapter with PeftModel.save_pretrained (the files longctx reads and writes), and
records, in float64, the loss of the base case's batch, the gradient of every adapter
tensor and the logits. The base weights are the golden case's, frozen.

Run once by hand from the repository root (the same venv as tools/make_golden.py, plus
peft):
    /tmp/gvenv/bin/pip install peft
    /tmp/gvenv/bin/python tools/make_lora_golden.py
    /tmp/gvenv/bin/python tools/make_lora_golden.py --dropout   (only lora_golden_dropout.safetensors)
    /tmp/gvenv/bin/python tools/make_lora_golden.py --check ADAPTER_DIR BASE_DIR MERGED_DIR
        (an adapter longctx train saved loads in PEFT, and longctx merge's output equals
         PEFT's merge_and_unload of it: weights and logits, float64)

Outputs, per case, in tests/data/lora/<case>/:
  adapter_config.json, adapter_model.safetensors   -- PEFT's files (float32)
  lora_golden.safetensors   -- float64 results stored as F32: loss [1], logits [S, V], grad.<PEFT tensor name>
  lora_golden.json          -- versions, r, alpha, targets, the base directory, the loss
  lora_golden_dropout.safetensors -- loss [1] and grad.<name> with lora_dropout 0.25 under longctx's
                               deterministic mask (pass key 0x0123456789ABCDEF, tokens 0..S-1)
"""
import json
import os
import sys

import numpy as np
import torch
from safetensors.numpy import save_file, load_file

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CASES = [
    # (name, base golden dir, seed, rslora)
    ("llama", "tests/data/golden_untied", 11, False),
    ("qwen2", "tests/data/golden_qwen2", 12, False),
    ("qwen3", "tests/data/golden_qwen3", 13, True),
]
R, ALPHA = 4, 8
TARGETS = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
IGNORE = -100


def load_base(base_dir):
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(os.path.join(REPO, base_dir), torch_dtype=torch.float64,
                                             attn_implementation="eager")
    m.eval()
    return m


def batch(base_dir):
    g = load_file(os.path.join(REPO, base_dir, "golden.safetensors"))
    ids = torch.tensor(g["input_ids"].astype(np.int64))
    labels = torch.tensor(g["labels"].astype(np.int64))
    return ids, labels


def loss_of(model, ids, labels):
    logits = model(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits[0, :-1], labels[0, 1:], ignore_index=IGNORE, reduction="mean")
    return loss, logits[0]


def bf16_worst(name, base_dir, adir, gold):
    """PEFT's own bf16 distance: the worst adapter tensor's relative L2 between its gradient
    under torch.autocast(bfloat16) and the float64 one (the scale of longctx's bf16 bounds:
    random adapters this large make the adapters' gradients sensitive to rounding)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    m = AutoModelForCausalLM.from_pretrained(os.path.join(REPO, base_dir), torch_dtype=torch.float32,
                                             attn_implementation="eager")
    pm = PeftModel.from_pretrained(m, adir, is_trainable=True)
    ids, labels = batch(base_dir)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = pm(input_ids=ids).logits
    loss = torch.nn.functional.cross_entropy(logits[0, :-1].float(), labels[0, 1:], ignore_index=IGNORE)
    loss.backward()
    w = 0.0
    for n, p in pm.named_parameters():
        if p.grad is not None:
            ref = torch.tensor(gold["grad." + n.replace(".default", "")], dtype=torch.float64)
            w = max(w, ((p.grad.double() - ref).norm() / ref.norm()).item())
    return w


def generate(name, base_dir, seed, rslora):
    from peft import LoraConfig, get_peft_model
    out = os.path.join(REPO, "tests/data/lora", name)
    os.makedirs(out, exist_ok=True)
    base = load_base(base_dir)
    cfg = LoraConfig(r=R, lora_alpha=ALPHA, target_modules=TARGETS, lora_dropout=0.0, bias="none",
                     task_type="CAUSAL_LM", use_rslora=rslora)
    pm = get_peft_model(base, cfg)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_A" in n or "lora_B" in n:
                p.copy_(0.3 * torch.randn(p.shape, generator=g, dtype=torch.float64))
    # The adapter as PEFT saves it (float32 on disk, as a float32 model would save it);
    # the golden numbers below use exactly those float32 values, widened.
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if "lora_" in n:
                p.copy_(p.to(torch.float32).to(torch.float64))
    sd = {}
    from peft import get_peft_model_state_dict
    for k, v in get_peft_model_state_dict(pm).items():
        sd[k] = v.detach().to(torch.float32).numpy()
    from safetensors.numpy import save_file as save_np
    save_np(sd, os.path.join(out, "adapter_model.safetensors"), metadata={"format": "pt"})
    pm.peft_config["default"].base_model_name_or_path = base_dir  # relative to the repository
    pm.peft_config["default"].save_pretrained(out)
    ids, labels = batch(base_dir)
    pm.zero_grad(set_to_none=True)
    loss, logits = loss_of(pm, ids, labels)
    loss.backward()
    # float64 results stored as F32 (the readers' type; fp32 rounding is far below the bounds)
    gold = {"loss": np.array([loss.item()], dtype=np.float32), "logits": logits.detach().numpy().astype(np.float32)}
    for n, p in pm.named_parameters():
        if p.grad is not None:
            assert "lora_" in n, n  # the base is frozen: only adapters have gradients
            key = n.replace(".default", "")
            gold["grad." + key] = p.grad.detach().numpy().astype(np.float32)
    save_file(gold, os.path.join(out, "lora_golden.safetensors"))
    bf16_w = bf16_worst(name, base_dir, out, gold)
    import peft, transformers
    meta = {"bf16_autocast_worst_rel_l2": bf16_w, "base": base_dir, "r": R, "lora_alpha": ALPHA, "use_rslora": rslora, "targets": TARGETS,
            "loss": repr(loss.item()), "seed": seed,
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__, "peft": peft.__version__}}
    with open(os.path.join(out, "lora_golden.json"), "w") as f:
        json.dump(meta, f, indent=2)
    print(name, "loss", loss.item(), "grads", sum(1 for k in gold if k.startswith("grad.")))


# LoRA dropout (longctx --lora-dropout): PEFT's nn.Dropout on each adapter's input,
# replaced by longctx's deterministic mask (src/core/dropout_hash.h, re-implemented here from its
# description) so both sides drop the same elements; PEFT's own scaling 1/(1-p) and
# placement (before lora_A) are what is tested. One pass key for the whole pass.
DROP_P = 0.25
DROP_KEY = 0x0123456789ABCDEF
PROJ = {"q_proj": 0, "k_proj": 1, "v_proj": 2, "o_proj": 3, "gate_proj": 4, "up_proj": 5, "down_proj": 6}
U64 = np.uint64


def mix64(x):
    x = x ^ (x >> U64(30))
    x = x * U64(0xBF58476D1CE4E5B9)
    x = x ^ (x >> U64(27))
    x = x * U64(0x94D049BB133111EB)
    return x ^ (x >> U64(31))


def drop_mask(layer, proj, rows, cols):
    """keep[g, j] for tokens g < rows and features j < cols (core/dropout_hash.h)."""
    one = np.array([(layer << 8 | proj)], dtype=U64)
    key = mix64(np.array([DROP_KEY], dtype=U64) ^ mix64(one + U64(0x2545F4914F6CDD1D)))[0]
    g = np.arange(rows, dtype=U64)[:, None]
    j = np.arange(cols, dtype=U64)[None, :]
    bits = mix64(U64(key) ^ mix64(((g << U64(32)) | j) + U64(0x9E3779B97F4A7C15))) >> U64(40)
    thr = int(float(np.float32(DROP_P)) * 16777216.0 + 0.5)
    return bits >= U64(thr)


class MaskDropout(torch.nn.Module):
    def __init__(self, layer, proj):
        super().__init__()
        self.layer, self.proj = layer, proj

    def forward(self, x):  # x [1, S, K]
        keep = torch.tensor(drop_mask(self.layer, self.proj, x.shape[-2], x.shape[-1]))
        return x * keep.to(x.dtype) / (1.0 - DROP_P)


def generate_dropout(name, base_dir):
    """lora_golden_dropout.safetensors: the loss and every adapter gradient of the committed
    adapter with dropout p = DROP_P under the mask above (float64)."""
    from peft import PeftModel
    out = os.path.join(REPO, "tests/data/lora", name)
    pm = PeftModel.from_pretrained(load_base(base_dir), out, is_trainable=True)
    pm = pm.double()
    n = 0
    for mname, mod in pm.named_modules():
        if hasattr(mod, "lora_dropout") and "default" in mod.lora_dropout:
            parts = mname.split(".")
            layer = int(parts[parts.index("layers") + 1])
            mod.lora_dropout["default"] = MaskDropout(layer, PROJ[parts[-1]])
            n += 1
    pm.train()
    ids, labels = batch(base_dir)
    loss, _ = loss_of(pm, ids, labels)
    loss.backward()
    gold = {"loss": np.array([loss.item()], dtype=np.float32)}
    for pn, p in pm.named_parameters():
        if p.grad is not None:
            gold["grad." + pn.replace(".default", "")] = p.grad.detach().numpy().astype(np.float32)
    save_file(gold, os.path.join(out, "lora_golden_dropout.safetensors"))
    print(name, "dropout", DROP_P, "modules", n, "loss", loss.item())


def check(adapter_dir, base_dir, merged_dir):
    """An adapter longctx saved loads in PEFT unchanged (PeftModel.from_pretrained), and
    longctx merge's output equals PEFT's merge_and_unload of it; the logits of PEFT's model
    and of transformers on the merged directory agree (float64)."""
    from peft import PeftModel
    from transformers import AutoModelForCausalLM
    pm = PeftModel.from_pretrained(load_base(base_dir), adapter_dir)
    ids = torch.randint(0, pm.config.vocab_size, (1, 37), generator=torch.Generator().manual_seed(7))
    with torch.no_grad():
        ref_logits = pm(input_ids=ids).logits[0]
    ref = pm.merge_and_unload().state_dict()
    mm = AutoModelForCausalLM.from_pretrained(merged_dir, torch_dtype=torch.float64, attn_implementation="eager")
    got = mm.state_dict()
    worst = max((got[k] - v).abs().max().item() for k, v in ref.items() if k in got)
    with torch.no_grad():
        dl = (mm(input_ids=ids).logits[0] - ref_logits).abs().max().item()
    print(f"PEFT loaded {adapter_dir}; max |longctx merge - merge_and_unload| = {worst:.3g}; "
          f"max |logits(merged) - logits(PEFT)| = {dl:.3g}")
    sys.exit(0 if worst <= 1e-6 and dl <= 1e-5 else 1)


if __name__ == "__main__":
    if len(sys.argv) >= 5 and sys.argv[1] == "--check":
        check(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) >= 2 and sys.argv[1] == "--dropout":
        for c in CASES:
            generate_dropout(c[0], c[1])
    else:
        for c in CASES:
            generate(*c)
            generate_dropout(c[0], c[1])
