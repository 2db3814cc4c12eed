#!/usr/bin/env python3
"""Golden reference data for longctx, produced by Hugging Face transformers itself.

longctx must compute exactly what transformers' LlamaForCausalLM (and the Mistral, Qwen2
and Qwen3 variants) computes. This script builds tiny random models in float32 (the cases
in CASES below), saves them the way transformers does, runs one batch through each with
the plain (eager) softmax attention, and records the input, labels, loss, logits and the
gradient of the loss w.r.t. every parameter.

Run once by hand, from the repository root (Python 3.11 here; torch from PyPI, since
download.pytorch.org was not reachable, so the default (CUDA-enabled, ~5.6 GB installed)
wheel is used; the computation below is CPU-only):

    python3 -m venv /tmp/gvenv
    /tmp/gvenv/bin/pip install torch transformers safetensors numpy
    /tmp/gvenv/bin/python tools/make_golden.py            # writes all golden dirs
    /tmp/gvenv/bin/python tools/make_golden.py --case qwen3 --case yarn   # only these
    /tmp/gvenv/bin/python tools/make_golden.py --verify tests/data/golden_untied
    /tmp/gvenv/bin/python tools/make_golden.py --verify tests/data/golden_tied
    /tmp/gvenv/bin/python tools/make_golden.py --check-load DIR   # any HF-format dir
    /tmp/gvenv/bin/python tools/make_golden.py --bf16     # golden_bf16.* from the saved cases
                                                          # (--case works here too)
    /tmp/gvenv/bin/python tools/make_golden.py --out-root /tmp/x [--bf16] [--case ...]
                                   # write under /tmp/x/tests/data/... instead (rerun checks)

Reruns: config.json, generation_config.json and model.safetensors come out byte-identical;
golden.safetensors and the f32/f64 numbers in golden.json agree only to float rounding
(~1e-6 relative: CPU kernels and thread count differ between machines), golden_bf16.* to
bf16 rounding. So do not regenerate committed cases without need: add a case and run it
with --case. The committed golden_untied/tied/mistral were made before the --case cases.

Versions the committed data was made with: torch 2.15.0, transformers 5.24.0,
safetensors 0.8.0, numpy 2.4.6 (also recorded in each golden.json).

Cases (see CASES for the exact parameters and the reasons for the numbers): golden_untied
(Llama, seed 1234), golden_tied (Llama, tied, seed 4321), golden_mistral (sliding window
8); RoPE scaling on Llama: golden_llama3, golden_linear, golden_dynamic, golden_yarn,
golden_longrope; golden_qwen2 (q/k/v biases), golden_qwen2_tied, golden_qwen3 (tied,
head_dim 24, q_norm/k_norm), golden_qwen3_bias (attention_bias: q/k/v/o biases, yarn
without truncation, mscale/mscale_all_dim). All: vocab 256, hidden 64, 2 layers, 4 heads,
2 KV heads, ffn 176, S = 37, rms_norm_eps 1e-6, SiLU.

Outputs, per case:
  config.json, model.safetensors  -- exactly what save_pretrained(safe_serialization=True)
                                     writes (float32, HF parameter names). Note that
                                     transformers 5.x writes rope_theta inside
                                     "rope_parameters": {"rope_theta": ..., "rope_type":
                                     "default"}; 4.x wrote a top-level "rope_theta".
                                     The tied model's file has no lm_head.weight.
  golden.safetensors              -- all tensors F32:
      input_ids  [1, S]   token ids stored as float32 (exact small integers)
      labels     [1, S]   HF labels stored as float32, -100 = ignored
      logits     [S, V]   logits of the single batch row
      loss       [1]      the loss transformers returned (float32)
      grad.<name>         d loss / d parameter, for each name in
                          model.named_parameters() (HF names, e.g.
                          model.layers.0.self_attn.q_proj.weight). The tied model has no
                          grad.lm_head.weight: its grad.model.embed_tokens.weight is the
                          sum of the embedding-lookup and output-projection gradients.
  golden.json                     -- loss as a 17-significant-digit decimal string, S,
                                     versions, seeds, conventions, tensor list, and the
                                     float32-vs-float64 differences (a tolerance hint).
                                     The RoPE-scaling and Qwen cases also record
                                     model_type, max_position_embeddings, head_dim, biases,
                                     rope_parameters (as in config.json) and "rope": the
                                     inv_freq and attention_scaling the golden forward used
                                     (read from the model), with the derived llama3 bands,
                                     yarn ramp, dynamic base, longrope factor choice.
                                     Dynamic RoPE: one forward of a freshly loaded model, so
                                     the rotary module grows once, from
                                     max_position_embeddings to S (seq_len = S).

Label conventions. HF takes labels aligned with input_ids and shifts them internally:
logits[:, t] predicts labels[:, t+1] for t < S-1, the last logits row predicts nothing,
and the loss is the mean of the token cross-entropies over the counted (label != -100)
positions (nothing passed as num_items_in_batch, so plain mean). longctx uses
pre-shifted targets: targets[t] = the token the model should predict at position t,
-100 = not counted. So targets[t] = labels[t+1] for t < S-1 and targets[S-1] = -100.

--check-load DIR loads an HF-format checkpoint directory (config.json + model.safetensors,
e.g. one longctx wrote) with AutoModelForCausalLM.from_pretrained(DIR), fails if any weight is
missing, unexpected or of the wrong shape, and runs a forward on a fixed input that needs
no RNG to reproduce: ids[t] = (31*t + 7) % vocab_size, t = 0..S-1 (S = 37 by default,
--seq-len to change), labels = ids (all counted; so targets[t] = ids[t+1]). It prints the
loss with 17 significant digits; --dump-logits FILE also writes the logits [S, V] (F32).
"""

import argparse
import copy
import json
import math
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
S = 37          # deliberately not a power of two
VOCAB = 256
IGNORE = -100

def _longrope_factors(seed):
    """head_dim/2 = 8 factors in [1, 4] each, rounded to 4 decimals so JSON holds them exactly as used."""
    rng = np.random.default_rng(seed)
    return ([round(float(x), 4) for x in rng.uniform(1.0, 4.0, 8)],
            [round(float(x), 4) for x in rng.uniform(1.0, 4.0, 8)])


_LR_SHORT, _LR_LONG = _longrope_factors(97531)

# One dict per case. Keys: dir, arch (llama | mistral | qwen2 | qwen3), tie, seed; optional: window
# (Mistral sliding_window), rope (rope_parameters dict, rope_theta included; None = the original
# {"rope_theta": 500000.0} call), mpe (max_position_embeddings, default 4096), head_dim (Qwen3),
# attention_bias (Qwen3), legacy_meta (golden.json without the keys added after those cases were made,
# so that regenerating them reproduces the committed files byte for byte).
CASES = [
    {"dir": "tests/data/golden_untied", "arch": "llama", "tie": False, "seed": 1234, "legacy_meta": True},
    {"dir": "tests/data/golden_tied", "arch": "llama", "tie": True, "seed": 4321, "legacy_meta": True},
    # Mistral architecture (Llama layers + a sliding window): each token sees its 8 most
    # recent tokens, itself included, so the window cuts most rows of the S = 37 sequence.
    {"dir": "tests/data/golden_mistral", "arch": "mistral", "tie": False, "seed": 2468, "window": 8},

    # ---- RoPE scaling variants (Llama, head_dim 16 -> 8 frequency pairs) ----
    # llama3: wavelen_i = 2*pi*theta^(i/8); high_freq_wavelen = 32/4 = 8, low_freq_wavelen = 32/1 = 32.
    # theta 200 puts pair 0 (6.28) in the high band (unchanged), pairs 1 (12.19, smooth 0.542) and
    # 2 (23.65, smooth 0.118) in the smoothing band and pairs 3..7 (45.8 .. 648) in the low band
    # (/8). (With theta 500000 and original 16 there can be no high band: 2*pi > 16/4.)
    {"dir": "tests/data/golden_llama3", "arch": "llama", "tie": False, "seed": 1357, "mpe": 4096,
     "rope": {"rope_type": "llama3", "rope_theta": 200.0, "factor": 8.0, "low_freq_factor": 1.0,
              "high_freq_factor": 4.0, "original_max_position_embeddings": 32}},
    {"dir": "tests/data/golden_linear", "arch": "llama", "tie": False, "seed": 1111, "mpe": 4096,
     "rope": {"rope_type": "linear", "rope_theta": 10000.0, "factor": 4.0}},
    # dynamic NTK: S = 37 > max_position_embeddings 16 -> base = 1e4 * (4*37/16 - 3)^(16/14).
    {"dir": "tests/data/golden_dynamic", "arch": "llama", "tie": False, "seed": 2222, "mpe": 16,
     "rope": {"rope_type": "dynamic", "rope_theta": 10000.0, "factor": 4.0}},
    # yarn: beta_fast 16 -> low = max(floor(-1.596), 0) = 0; beta_slow 0.25 -> high = ceil(2.016) = 3:
    # ramp over pairs = [0, 1/3, 2/3, 1, ...]; attention factor 0.1*ln(4) + 1 = 1.1386.
    {"dir": "tests/data/golden_yarn", "arch": "llama", "tie": False, "seed": 3333, "mpe": 64,
     "rope": {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0,
              "original_max_position_embeddings": 16, "beta_fast": 16.0, "beta_slow": 0.25}},
    # longrope: no "factor" -> factor = 64/16 = 4, attention factor sqrt(1 + ln 4 / ln 16) = sqrt(1.5);
    # S = 37 > 16 -> long_factor.
    {"dir": "tests/data/golden_longrope", "arch": "llama", "tie": False, "seed": 4444, "mpe": 64,
     "rope": {"rope_type": "longrope", "rope_theta": 10000.0, "original_max_position_embeddings": 16,
              "short_factor": _LR_SHORT, "long_factor": _LR_LONG}},

    # ---- Qwen2 (q/k/v bias, no o bias) and Qwen3 (q_norm/k_norm over head_dim) ----
    {"dir": "tests/data/golden_qwen2", "arch": "qwen2", "tie": False, "seed": 5555, "mpe": 32768,
     "rope": {"rope_type": "default", "rope_theta": 1000000.0}},
    {"dir": "tests/data/golden_qwen2_tied", "arch": "qwen2", "tie": True, "seed": 6666, "mpe": 32768,
     "rope": {"rope_type": "default", "rope_theta": 1000000.0}},
    {"dir": "tests/data/golden_qwen3", "arch": "qwen3", "tie": True, "seed": 7777, "mpe": 40960,
     "head_dim": 24, "attention_bias": False,
     "rope": {"rope_type": "default", "rope_theta": 1000000.0}},
    # yarn without truncation and with mscale/mscale_all_dim: default betas 32/1 give the fractional
    # range low = 1.7454, high = 3.7522 (ramp [0, 0, 0.127, 0.625, 1, ...]); attention factor
    # (0.1*1*ln 4 + 1) / (0.1*0.5*ln 4 + 1) = 1.0648.
    {"dir": "tests/data/golden_qwen3_bias", "arch": "qwen3", "tie": False, "seed": 8888, "mpe": 16384,
     "head_dim": 16, "attention_bias": True,
     "rope": {"rope_type": "yarn", "rope_theta": 1000000.0, "factor": 4.0,
              "original_max_position_embeddings": 4096, "truncate": False,
              "mscale": 1.0, "mscale_all_dim": 0.5}},
]


CONVENTIONS = {
    "labels": "HF convention: labels aligned with input_ids; transformers shifts them "
              "internally, so logits[t] predicts labels[t+1] for t < S-1 and the last "
              "logits row predicts nothing. -100 = ignored.",
    "loss": "mean over counted tokens: sum_t CE(logits[t], labels[t+1]) over t < S-1 "
            "with labels[t+1] != -100, divided by the number of such t.",
    "longctx_targets": "longctx uses pre-shifted targets: targets[t] = labels[t+1] for "
                       "t < S-1, targets[S-1] = -100 (-100 = not counted).",
    "input_ids_labels_dtype": "input_ids and labels are stored as F32 holding exact "
                              "integer values (longctx reads F32/BF16/F16 only).",
    "logits_layout": "logits is [S, vocab_size], the single batch row, row-major.",
    "grads": "grad.<HF parameter name> = d loss / d parameter, same shape as the "
             "parameter. Tied model: no lm_head entry; grad.model.embed_tokens.weight "
             "holds the sum of both uses.",
    "attention": "attn_implementation='eager' (plain softmax), float32 on CPU.",
}


ARCH = {
    "llama": ("LlamaConfig", "LlamaForCausalLM"),
    "mistral": ("MistralConfig", "MistralForCausalLM"),
    "qwen2": ("Qwen2Config", "Qwen2ForCausalLM"),
    "qwen3": ("Qwen3Config", "Qwen3ForCausalLM"),
}


def case_name(case):
    return os.path.basename(case["dir"])[len("golden_"):]


def case_classes(case):
    import transformers
    c, m = ARCH[case["arch"]]
    return getattr(transformers, c), getattr(transformers, m)


def make_config(case, Config):
    arch = case["arch"]
    extra = {"sliding_window": case["window"]} if case.get("window") else {}
    if case.get("rope") is None:
        extra["rope_theta"] = 500000.0  # the original cases: saved as {"rope_theta", "rope_type": "default"}
    else:
        extra["rope_parameters"] = copy.deepcopy(case["rope"])
    if arch in ("llama", "mistral"):
        extra.update(attention_bias=False, mlp_bias=False)
    elif arch == "qwen3":
        extra.update(head_dim=case["head_dim"], attention_bias=case["attention_bias"])
    # qwen2: q/k/v always biased, o never (no config switch); no sliding window (use_sliding_window False)
    return Config(
        **extra,
        vocab_size=VOCAB,
        hidden_size=64,
        intermediate_size=176,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        rms_norm_eps=1e-6,
        max_position_embeddings=case.get("mpe", 4096),
        tie_word_embeddings=case["tie"],
        hidden_act="silu",
    )


def init_weights(model, seed, torch):
    """Larger spread than HF's 0.02 so every path carries signal."""
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                p.copy_(0.2 * torch.randn(p.shape, generator=g))


def make_batch(seed, torch):
    g = torch.Generator().manual_seed(seed + 2)
    ids = torch.randint(0, VOCAB, (1, S), generator=g, dtype=torch.long)
    labels = ids.clone()
    # every 7th position, starting at 3 so that each ignored label lies in the shifted
    # range 1..S-1 and really removes a term from the loss (positions 3,10,17,24,31).
    labels[0, 3::7] = IGNORE
    return ids, labels


def forward_backward(model, ids, labels):
    """transformers' own loss (labels passed in; it upcasts logits to float32)."""
    model.zero_grad(set_to_none=True)
    out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return out.loss.detach(), out.logits.detach()[0], grads


def forward_backward_f64(model, ids, labels, torch):
    """Same loss computed entirely in float64 (transformers' loss would cast the logits
    to float32), for the float32-vs-float64 tolerance hint only."""
    model.zero_grad(set_to_none=True)
    logits = model(input_ids=ids).logits
    assert logits.dtype == torch.float64
    loss = torch.nn.functional.cross_entropy(
        logits[0, :-1], labels[0, 1:], ignore_index=IGNORE, reduction="mean")
    loss.backward()
    grads = {n: p.grad.detach().clone() for n, p in model.named_parameters()}
    return loss.detach(), logits.detach()[0], grads


def np_loss_f64(logits, labels):
    """Loss recomputed in float64 numpy from [S, V] logits and [S] HF labels."""
    lg = np.asarray(logits, dtype=np.float64)[:-1]
    tgt = np.asarray(labels).astype(np.int64)[1:]
    keep = tgt != IGNORE
    lg, tgt = lg[keep], tgt[keep]
    m = lg.max(axis=1, keepdims=True)
    lse = m[:, 0] + np.log(np.exp(lg - m).sum(axis=1))
    return float(np.mean(lse - lg[np.arange(len(tgt)), tgt])), int(keep.sum())


def rope_record(case, model, cfg_json, torch):
    """What the golden forward used for RoPE: the rotary module's inv_freq (after the forward, so the
    dynamic / longrope updates are in) and attention_scaling, plus the type's derived quantities."""
    rot = model.model.rotary_emb
    rp = cfg_json["rope_parameters"]
    theta = rp["rope_theta"]
    dim = model.model.layers[0].self_attn.head_dim  # Qwen2Config has no head_dim field
    inv0 = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float) / dim))
    rec = {
        "rope_type": rp["rope_type"],
        "rotary_dim": dim,
        "inv_freq_unscaled_f32": [float(x) for x in inv0],
        "inv_freq_f32": [float(x) for x in rot.inv_freq.float()],
        "attention_scaling": float(rot.attention_scaling),
        "positions": f"0..{S - 1}",
        "note": "cos/sin = cos/sin(pos * inv_freq) * attention_scaling (float32), applied to q and k; "
                "rotate_half (half-split) layout; inv_freq_f32 is read from the model's rotary module after "
                "the golden forward.",
    }
    t = rp["rope_type"]
    if t == "llama3":
        old = rp["original_max_position_embeddings"]
        hw, lw = old / rp["high_freq_factor"], old / rp["low_freq_factor"]
        bands = []
        for x in inv0.double().tolist():
            wl = 2 * math.pi / x
            bands.append("high (unchanged)" if wl < hw else "low (/factor)" if wl > lw else
                         "medium (smooth %.6f)" % ((old / wl - rp["low_freq_factor"]) /
                                                   (rp["high_freq_factor"] - rp["low_freq_factor"])))
        rec["llama3_bands"] = bands
        rec["llama3_wavelens"] = [2 * math.pi / x for x in inv0.double().tolist()]
    elif t == "dynamic":
        f, mpe = rp["factor"], model.config.max_position_embeddings
        rec["dynamic_seq_len"] = S
        rec["dynamic_base_f64"] = theta * ((f * max(S, mpe) / mpe) - (f - 1)) ** (dim / (dim - 2))
    elif t == "yarn":
        orig = rp["original_max_position_embeddings"]
        fcd = lambda r: (dim * math.log(orig / (r * 2 * math.pi))) / (2 * math.log(theta))
        lo, hi = fcd(rp.get("beta_fast") or 32), fcd(rp.get("beta_slow") or 1)
        if rp.get("truncate", True):
            lo, hi = math.floor(lo), math.ceil(hi)
        lo, hi = max(lo, 0), min(hi, dim - 1)
        if lo == hi:
            hi += 0.001
        rec["yarn_low_high"] = [lo, hi]
        rec["yarn_ramp"] = [min(max((i - lo) / (hi - lo), 0.0), 1.0) for i in range(dim // 2)]
    elif t == "longrope":
        orig = rp["original_max_position_embeddings"]
        rec["longrope_factors_used"] = "long_factor" if S > orig else "short_factor"
    return rec


def generate(case, root=REPO):
    import torch
    import transformers
    import safetensors
    from safetensors.torch import save_file

    rel_dir, tie, seed, window = case["dir"], case["tie"], case["seed"], case.get("window")
    torch.manual_seed(seed)
    out_dir = os.path.join(root, rel_dir)
    os.makedirs(out_dir, exist_ok=True)

    Config, Model = case_classes(case)
    cfg = make_config(case, Config)
    model = Model(cfg).to(torch.float32)
    init_weights(model, seed, torch)
    model.save_pretrained(out_dir, safe_serialization=True)

    # Reload what was saved, so the reference is computed from the files on disk.
    model, info = Model.from_pretrained(
        out_dir, attn_implementation="eager", dtype=torch.float32, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        sys.exit(f"{rel_dir}: reload reported problems: {bad}")
    model.train()  # no dropout in this config (attention_dropout 0), train() for clarity
    assert model.config._attn_implementation == "eager"

    # One forward + backward from the freshly loaded model (for dynamic RoPE this is the simple state:
    # the rotary module grows from max_position_embeddings to S once, in this forward).
    ids, labels = make_batch(seed, torch)
    loss, logits, grads = forward_backward(model, ids, labels)

    # float64 copy of the same model: how far float32 is from exact, as a tolerance hint.
    model64 = Model.from_pretrained(
        out_dir, attn_implementation="eager", dtype=torch.float64)
    loss64, logits64, grads64 = forward_backward_f64(model64, ids, labels, torch)
    grad_diff = {}
    for n, gr in grads.items():
        d = (gr.double() - grads64[n]).abs().max().item()
        scale = grads64[n].abs().max().item()
        grad_diff[n] = {"max_abs_diff": d, "max_abs_f64": scale}

    tensors = {
        "input_ids": ids.to(torch.float32).contiguous(),
        "labels": labels.to(torch.float32).contiguous(),
        "logits": logits.to(torch.float32).contiguous(),
        "loss": loss.reshape(1).to(torch.float32).contiguous(),
    }
    for n, gr in grads.items():
        tensors["grad." + n] = gr.to(torch.float32).contiguous()
    save_file(tensors, os.path.join(out_dir, "golden.safetensors"),
              metadata={"format": "longctx-golden"})  # one key: several are written in random order

    loss_np, counted = np_loss_f64(logits.numpy(), labels[0].numpy())
    meta = {
        "loss": "%.17g" % float(loss.item()),
        "loss_f64_recomputed_from_logits": "%.17g" % loss_np,
        "loss_model_f64": "%.17g" % float(loss64.item()),
        "S": S,
        "batch": 1,
        "vocab_size": VOCAB,
        "counted_tokens": counted,
        "ignored_label_positions": [int(i) for i in range(3, S, 7)],
        "seed": seed,
        "tie_word_embeddings": tie,
    }
    if not case.get("legacy_meta"):  # keys added with golden_mistral
        meta["sliding_window"] = window
        meta["architecture"] = Model.__name__
    init = "matrices and embeddings: normal(0, 0.2); RMSNorm weights: 1 + 0.1*normal"
    if case.get("rope") is not None:  # keys added with the RoPE-scaling and Qwen cases
        cfg_json = json.load(open(os.path.join(out_dir, "config.json")))
        meta["model_type"] = cfg_json["model_type"]
        meta["max_position_embeddings"] = cfg_json["max_position_embeddings"]
        meta["head_dim"] = model.model.layers[0].self_attn.head_dim
        meta["biases"] = sorted({n.split(".", 3)[3] for n, _ in model.named_parameters()
                                 if n.endswith(".bias") and n.startswith("model.layers.")})
        meta["rope_parameters"] = cfg_json["rope_parameters"]
        meta["rope"] = rope_record(case, model, cfg_json, torch)
        init = ("matrices, embeddings and biases: normal(0, 0.2); RMSNorm weights (incl. Qwen3 "
                "q_norm/k_norm): 1 + 0.1*normal; drawn in model.named_parameters() order from "
                "torch.Generator().manual_seed(seed + 1)")
    meta.update({
        "versions": {
            "torch": torch.__version__,
            "transformers": transformers.__version__,
            "safetensors": safetensors.__version__,
            "numpy": np.__version__,
            "python": sys.version.split()[0],
        },
        "init": init,
        "conventions": CONVENTIONS,
        "tensors": {k: {"dtype": "F32", "shape": list(v.shape)} for k, v in tensors.items()},
        "f32_vs_f64_model": {
            "loss_abs_diff": abs(float(loss.item()) - float(loss64.item())),
            "logits_max_abs_diff": (logits.double() - logits64).abs().max().item(),
            "logits_max_abs": logits64.abs().max().item(),
            "grads": grad_diff,
        },
        "command": "python tools/make_golden.py",
    })
    with open(os.path.join(out_dir, "golden.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"{rel_dir}: loss {meta['loss']} (f64 from logits {meta['loss_f64_recomputed_from_logits']},"
          f" f64 model {meta['loss_model_f64']}), {counted} counted tokens,"
          f" {len(grads)} parameter grads")


def verify(d):
    """Read golden.safetensors back with the safetensors package and check it."""
    from safetensors import safe_open
    from safetensors.numpy import load_file

    path = os.path.join(d, "golden.safetensors")
    with safe_open(path, framework="np") as f:
        meta_st = f.metadata()
    t = load_file(path)
    meta = json.load(open(os.path.join(d, "golden.json")))
    w = load_file(os.path.join(d, "model.safetensors"))
    ok = True

    def check(cond, msg):
        nonlocal ok
        print(("ok   " if cond else "FAIL ") + msg)
        ok = ok and bool(cond)

    for k, v in t.items():
        check(v.dtype == np.float32, f"{k} {v.dtype} {list(v.shape)}")
    ids, labels = t["input_ids"][0], t["labels"][0]
    check(np.all(ids == np.round(ids)) and ids.min() >= 0 and ids.max() < VOCAB, "input_ids integral, in range")
    check(np.all((labels == IGNORE) | (labels == ids)), "labels = input_ids or -100")
    check(t["logits"].shape == (meta["S"], meta["vocab_size"]), "logits shape [S, V]")
    loss_np, counted = np_loss_f64(t["logits"], labels)
    rec = float(meta["loss"])
    rel = abs(loss_np - rec) / abs(rec)
    check(rel < 1e-6, f"loss recomputed in float64 from logits {loss_np:.17g} vs recorded {rec:.17g} (rel {rel:.2e})")
    check(float(t["loss"][0]) == np.float32(rec), "loss tensor equals golden.json loss")
    check(counted == meta["counted_tokens"], f"counted tokens {counted}")
    grads = sorted(k[5:] for k in t if k.startswith("grad."))
    check(set(grads) == set(w.keys()), f"one grad per saved parameter ({len(grads)})")
    for n in grads:
        g = t["grad." + n]
        check(g.shape == w[n].shape and np.isfinite(g).all() and np.abs(g).max() > 0,
              f"grad.{n} shape {list(g.shape)} finite, nonzero (max |g| {np.abs(g).max():.3e})")
    if "rope_parameters" in meta:
        cfg = json.load(open(os.path.join(d, "config.json")))
        check(cfg.get("rope_parameters") == meta["rope_parameters"],
              f"config.json rope_parameters = golden.json's ({meta['rope_parameters'].get('rope_type')})")
    print(f"metadata: {meta_st}")
    print("VERIFY " + ("PASSED" if ok else "FAILED") + f": {d}")
    return ok


def check_load(d, seq_len, dump_logits):
    import torch
    from transformers import AutoModelForCausalLM as LlamaForCausalLM  # Llama or Mistral

    model, info = LlamaForCausalLM.from_pretrained(
        d, attn_implementation="eager", dtype=torch.float32, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v}
    if bad:
        print(f"FAIL: loading {d} reported problems: {bad}")
        return False
    model.eval()
    V = model.config.vocab_size
    ids = torch.tensor([[(31 * t + 7) % V for t in range(seq_len)]], dtype=torch.long)
    with torch.no_grad():
        out = model(input_ids=ids, labels=ids.clone())
    loss = float(out.loss.item())
    print(f"config: vocab {V}, hidden {model.config.hidden_size}, layers "
          f"{model.config.num_hidden_layers}, heads {model.config.num_attention_heads}/"
          f"{model.config.num_key_value_heads}, tied {model.config.tie_word_embeddings}, "
          f"rope_theta {model.config.rope_parameters['rope_theta']}, eps {model.config.rms_norm_eps}")
    print(f"input: ids[t] = (31*t + 7) % {V}, t = 0..{seq_len - 1}; labels = ids")
    print("loss %.17g" % loss)
    if dump_logits:
        from safetensors.torch import save_file
        save_file({"logits": out.logits[0].float().contiguous()}, dump_logits)
        print(f"logits [{seq_len}, {V}] written to {dump_logits}")
    if not math.isfinite(loss):
        print("FAIL: loss is not finite")
        return False
    print(f"CHECK-LOAD PASSED: {d}")
    return True


def generate_bf16(rel_dir, root=REPO):
    """The same batch through the same saved model under torch.autocast(bfloat16) on the
    CPU (fp32 master weights; linear layers and attention matmuls in bf16, softmax and the
    loss in fp32): golden_bf16.safetensors (loss, logits, grads) and golden_bf16.json
    (with the distance of each from the fp32 golden values, a scale for tolerances)."""
    import torch
    import transformers
    from safetensors.numpy import load_file
    from safetensors.torch import save_file
    from transformers import AutoModelForCausalLM

    d = os.path.join(root, rel_dir)
    g32 = load_file(os.path.join(d, "golden.safetensors"))
    model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32)
    model.train()
    ids = torch.from_numpy(g32["input_ids"]).long()
    labels = torch.from_numpy(g32["labels"]).long()
    with torch.autocast(device_type="cpu", dtype=torch.bfloat16):
        model.zero_grad(set_to_none=True)
        out = model(input_ids=ids, labels=labels)
    out.loss.backward()
    loss = out.loss.detach().float()
    logits = out.logits.detach()[0].float()
    grads = {n: p.grad.detach().float().clone() for n, p in model.named_parameters()}
    tensors = {"loss": loss.reshape(1).contiguous(), "logits": logits.contiguous()}
    for n, gr in grads.items():
        tensors["grad." + n] = gr.contiguous()
    save_file(tensors, os.path.join(d, "golden_bf16.safetensors"), metadata={"format": "longctx-golden-bf16"})
    rel = {}
    for n, gr in grads.items():
        ref = g32["grad." + n].astype(np.float64)
        rel[n] = float(np.linalg.norm(gr.numpy().astype(np.float64) - ref) / np.linalg.norm(ref))
    meta = {
        "loss": "%.17g" % float(loss.item()),
        "loss_fp32_golden": "%.17g" % float(g32["loss"][0]),
        "logits_max_abs_diff_vs_fp32": float(np.abs(logits.numpy() - g32["logits"]).max()),
        "grads_rel_l2_vs_fp32": rel,
        "mode": "torch.autocast(device_type='cpu', dtype=torch.bfloat16) around the forward; backward outside it; "
                "fp32 parameters and gradients; eager attention (probabilities cast to bf16 before P @ V)",
        "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
        "command": "python tools/make_golden.py --bf16",
    }
    with open(os.path.join(d, "golden_bf16.json"), "w") as f:
        json.dump(meta, f, indent=2)
        f.write("\n")
    print(f"{rel_dir}: bf16 loss {meta['loss']} (fp32 {meta['loss_fp32_golden']}), "
          f"grads rel L2 vs fp32 up to {max(rel.values()):.3e}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--check-load", metavar="DIR", help="load an HF-format checkpoint dir and print the loss on a fixed input")
    ap.add_argument("--seq-len", type=int, default=S, help="sequence length for --check-load (default 37)")
    ap.add_argument("--dump-logits", metavar="FILE", help="with --check-load: write the logits to FILE (safetensors)")
    ap.add_argument("--verify", metavar="DIR", help="read a golden dir back and recompute the loss in float64")
    ap.add_argument("--bf16", action="store_true", help="write golden_bf16.* (torch.autocast bf16) next to each case's golden data")
    ap.add_argument("--case", action="append", metavar="NAME",
                    help="only this case (repeatable): " + ", ".join(case_name(c) for c in CASES))
    ap.add_argument("--out-root", metavar="DIR", default=REPO,
                    help="write (and, with --bf16, read) the case dirs under DIR instead of the repository "
                         "root, e.g. to check that a rerun reproduces the committed files")
    a = ap.parse_args()
    cases = CASES
    if a.case:
        names = {case_name(c): c for c in CASES}
        unknown = [n for n in a.case if n.removeprefix("golden_") not in names]
        if unknown:
            ap.error(f"unknown case(s) {unknown}; known: {', '.join(names)}")
        cases = [names[n.removeprefix("golden_")] for n in a.case]
    if a.bf16:
        for case in cases:
            generate_bf16(case["dir"], a.out_root)
        return
    if a.check_load:
        sys.exit(0 if check_load(a.check_load, a.seq_len, a.dump_logits) else 1)
    if a.verify:
        sys.exit(0 if verify(a.verify) else 1)
    for case in cases:
        generate(case, a.out_root)


if __name__ == "__main__":
    main()
