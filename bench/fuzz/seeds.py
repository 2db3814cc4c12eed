#!/usr/bin/env python3
"""Seed corpora of the fuzz targets (bench/fuzz/run.sh): small valid files of each kind,
made here or copied from the test data, plus the regression inputs of tests/data/fuzz, and a
libFuzzer dictionary per target. usage: seeds.py ROOT OUTDIR -> OUTDIR/corpus_<target>/,
OUTDIR/<target>.dict."""
import glob, json, os, shutil, struct, sys

root, out = sys.argv[1], sys.argv[2]
M = (1 << 64) - 1


def corpus(target):
    d = os.path.join(out, "corpus_" + target)
    os.makedirs(d, exist_ok=True)
    return d


def put(target, name, data):
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(corpus(target), name), "wb") as f:
        f.write(data)


def copy(target, pattern, max_bytes=65536):
    """Copies the files matching pattern (none above max_bytes: big seeds slow every mutation)."""
    for p in sorted(glob.glob(os.path.join(root, pattern))):
        if os.path.isfile(p) and os.path.getsize(p) <= max_bytes:
            rel = os.path.relpath(p, root).replace("/", "_")
            shutil.copy(p, os.path.join(corpus(target), rel))


def dict_(target, words):
    with open(os.path.join(out, target + ".dict"), "w") as f:
        for w in words:
            f.write(json.dumps(w) + "\n" if not w.startswith('"') else w + "\n")


# core/hash.h's checksum (the checkpoint seeds carry the checksums of their files)
def hash64(b):
    K1, K2 = 0x9e3779b97f4a7c15, 0xc2b2ae3d27d4eb4f
    rnd = lambda acc, w: ((((acc ^ (w * K2 & M)) << 31 | (acc ^ (w * K2 & M)) >> 33) & M) * K1) & M
    acc, n = 0x27d4eb2f165667c5, len(b)
    for i in range(0, n - n % 8, 8):
        acc = rnd(acc, struct.unpack("<Q", b[i:i + 8])[0])
    if n % 8:
        acc = rnd(acc, struct.unpack("<Q", b[n - n % 8:] + b"\0" * (8 - n % 8))[0])
    z = acc ^ n
    z = ((z ^ (z >> 30)) * 0xbf58476d1ce4e5b9) & M
    z = ((z ^ (z >> 27)) * 0x94d049bb133111eb) & M
    return z ^ (z >> 31)


def safetensors(tensors, meta=None, pad=True):
    hdr, data = {}, b""
    if meta:
        hdr["__metadata__"] = meta
    for n, (dt, shape, raw) in tensors.items():
        hdr[n] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    if pad:
        h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


# ---- safetensors
put("fuzz_safetensors", "one_f32", safetensors({"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))}, {"format": "pt"}))
put("fuzz_safetensors", "mixed", safetensors({"b": ("BF16", [3], b"\x80\x3f\x01\x00\x80\xff"), "h": ("F16", [2], b"\x00\x3c\x00\x7c"),
                                              "i": ("I64", [1], b"\0" * 8), "s": ("F32", [], struct.pack("<f", 5))}))
put("fuzz_safetensors", "empty", safetensors({}))
put("fuzz_safetensors", "zero_size", safetensors({"z": ("F32", [0, 3], b""), "y": ("F16", [1], b"\x00\x3c")}, pad=False))
copy("fuzz_safetensors", "tests/data/fuzz/st_*")
dict_("fuzz_safetensors", ["dtype", "shape", "data_offsets", "__metadata__", "F32", "BF16", "F16", "I64", "F8_E4M3",
                           '":{"', '"[0,"', '"]}"', '"\\x00\\x00\\x00\\x00\\x00\\x00\\x00"'])


# ---- token files: versions 1 to 3, with and without the document index (3: a loss mask)
def tokfile(version, bpt, vocab, toks, starts=None, mask=None):
    flags = 1 if starts is not None else 0
    b = b"LCTOKENS" + struct.pack("<IIIIQ", version, bpt, vocab, flags, len(toks))
    b += struct.pack("<%d%s" % (len(toks), "H" if bpt == 2 else "I"), *toks)
    if mask is not None:
        b += bytes(mask)
    if starts is not None:
        b += struct.pack("<Q", len(starts)) + struct.pack("<%dQ" % len(starts), *starts)
    return b


put("fuzz_tokfile", "v1_u16", tokfile(1, 2, 256, [1, 2, 3, 255]))
put("fuzz_tokfile", "v1_u32", tokfile(1, 4, 128256, [0, 70000, 128255]))
put("fuzz_tokfile", "v1_oov", tokfile(1, 2, 65536, [5, 40000, 7]))
put("fuzz_tokfile", "v2_plain", tokfile(2, 2, 300, [1, 299, 3]))
put("fuzz_tokfile", "v2_docs", tokfile(2, 2, 256, [1, 2, 3, 4, 5, 6], [0, 2, 5]))
put("fuzz_tokfile", "v2_docs_u32", tokfile(2, 4, 100000, [9, 99999, 0], [0, 1]))
put("fuzz_tokfile", "v3_mask", tokfile(3, 2, 300, [1, 299, 3, 4], mask=[0, 1, 1, 0]))
put("fuzz_tokfile", "v3_mask_docs", tokfile(3, 4, 100000, [9, 99999, 0, 5], [0, 2], mask=[0, 0, 1, 1]))
copy("fuzz_tokfile", "tests/data/fuzz/tok_*")
copy("fuzz_tokfile", "tests/data/tok/*/prepared*.tok")
copy("fuzz_tokfile", "tests/data/chat/*.tok")
dict_("fuzz_tokfile", ["LCTOKENS", '"\\x01\\x00\\x00\\x00"', '"\\x02\\x00\\x00\\x00"', '"\\x03\\x00\\x00\\x00"', '"\\x04\\x00\\x00\\x00"',
                       '"\\x00\\x00\\x00\\x00\\x00\\x00\\x00\\x00"'])

# ---- GGUF
copy("fuzz_gguf", "tests/data/fuzz/gguf_*")
copy("fuzz_gguf", "tests/data/gguf/*.gguf")
dict_("fuzz_gguf", ["GGUF", '"\\x03\\x00\\x00\\x00"', '"\\x02\\x00\\x00\\x00"', '"\\x08\\x00\\x00\\x00"',
                    '"\\x09\\x00\\x00\\x00"', "general.alignment", "general.architecture", '"\\x00\\x00\\x00\\x00\\x00\\x00\\x00"',
                    '"\\xff\\xff\\xff\\xff\\xff\\xff\\xff\\xff"'])

# ---- tokenizers (tokenizer.json, GGUF vocabularies) and what once broke them
copy("fuzz_tok", "tests/data/tok/fuzz/*")
dict_("fuzz_tok", ['"\\"type\\""', '"\\"BPE\\""', '"\\"ByteLevel\\""', '"\\"Sequence\\""', '"\\"Split\\""', '"\\"Digits\\""',
                   '"\\"Metaspace\\""', '"\\"NFC\\""', '"\\"Prepend\\""', '"\\"Replace\\""', '"\\"TemplateProcessing\\""',
                   '"\\"added_tokens\\""', '"\\"merges\\""', '"\\"vocab\\""', '"\\"byte_fallback\\":true"',
                   '"\\"ignore_merges\\":true"', '"\\"lstrip\\":true"', '"\\"rstrip\\":true"', '"\\"single_word\\":true"',
                   '"\\"normalized\\":true"', "<0x41>", '"\\xc4\\xa0"', '"\\xe2\\x96\\x81"', "GGUF", "tokenizer.ggml.model",
                   "tokenizer.ggml.tokens", "tokenizer.ggml.merges", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"])

# ---- HF config.json of every family (the golden models: Llama, Mistral, Qwen2, Qwen3; RoPE
# scaling linear, dynamic, llama3, yarn, longrope), and rope_scaling (transformers 4) forms
copy("fuzz_config", "tests/data/golden_*/config.json")
base = json.load(open(os.path.join(root, "tests/data/golden_untied/config.json")))
for name, rs in {"v4_linear": {"type": "linear", "factor": 2.0},
                 "v4_llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                               "original_max_position_embeddings": 1024},
                 "v4_yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 1024}}.items():
    c = dict(base)
    c.pop("rope_parameters", None)
    c["rope_theta"], c["rope_scaling"] = 10000.0, rs
    put("fuzz_config", name, json.dumps(c))
dict_("fuzz_config", ["model_type", "architectures", "llama", "mistral", "qwen2", "qwen3", "LlamaForCausalLM",
                      "MistralForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "hidden_size", "intermediate_size",
                      "num_hidden_layers", "num_attention_heads", "num_key_value_heads", "head_dim", "vocab_size",
                      "rms_norm_eps", "rope_theta", "rope_scaling", "rope_parameters", "rope_type", "factor",
                      "low_freq_factor", "high_freq_factor", "original_max_position_embeddings", "short_factor",
                      "long_factor", "attention_factor", "beta_fast", "beta_slow", "truncate", "sliding_window",
                      "use_sliding_window", "max_window_layers", "layer_types", "sliding_attention", "full_attention",
                      "tie_word_embeddings", "max_position_embeddings", "attention_bias", "mlp_bias", "hidden_act",
                      "silu", "pretraining_tp", "attention_dropout", "quantization_config", "partial_rotary_factor",
                      "linear", "dynamic", "llama3", "yarn", "longrope", "default", "null", "true", "false", "1e-06"])

# ---- PEFT: adapter_config.json [NUL adapter_model.safetensors] for fuzz_peft's base (hidden 8,
# ffn 12, 1 layer, 2 heads of 4, 1 kv head; rank 2 on every projection)
peft_cfg = json.load(open(os.path.join(root, "tests/data/lora/llama/adapter_config.json")))
peft_cfg["r"], peft_cfg["lora_alpha"] = 2, 4
shapes = {"q_proj": ("self_attn", 8, 8), "k_proj": ("self_attn", 4, 8), "v_proj": ("self_attn", 4, 8),
          "o_proj": ("self_attn", 8, 8), "gate_proj": ("mlp", 12, 8), "up_proj": ("mlp", 12, 8), "down_proj": ("mlp", 8, 12)}
ad = {}
for m, (blk, o, i) in shapes.items():
    pre = "base_model.model.model.layers.0.%s.%s." % (blk, m)
    ad[pre + "lora_A.weight"] = ("F32", [2, i], struct.pack("<%df" % (2 * i), *[0.01 * k for k in range(2 * i)]))
    ad[pre + "lora_B.weight"] = ("F32", [o, 2], struct.pack("<%df" % (2 * o), *[0.02 * k for k in range(2 * o)]))
weights = safetensors(ad, {"format": "pt"})
put("fuzz_peft", "config_and_weights", json.dumps(peft_cfg).encode() + b"\0" + weights)
put("fuzz_peft", "config_only", json.dumps(peft_cfg))
small = dict(peft_cfg, target_modules="q_proj,v_proj", use_rslora=True, lora_dropout=0.1)
put("fuzz_peft", "two_targets", json.dumps(small).encode() + b"\0" +
    safetensors({k: v for k, v in ad.items() if ".q_proj." in k or ".v_proj." in k}))
put("fuzz_peft", "all_linear", json.dumps(dict(peft_cfg, target_modules="all-linear")).encode() + b"\0" + weights)
copy("fuzz_peft", "tests/data/lora/*/adapter_config.json")
dict_("fuzz_peft", ["peft_type", "LORA", "r", "lora_alpha", "target_modules", "all-linear", "q_proj", "k_proj", "v_proj",
                    "o_proj", "gate_proj", "up_proj", "down_proj", "use_rslora", "use_dora", "lora_dropout", "bias", "none",
                    "fan_in_fan_out", "rank_pattern", "alpha_pattern", "layers_to_transform", "modules_to_save",
                    "base_model.model.model.layers.0.", "self_attn.", "mlp.", ".lora_A.weight", ".lora_B.weight",
                    ".lora_A.default.weight", "F32", "BF16", "dtype", "shape", "data_offsets"])

# ---- machine files (what calibrate writes) and hardware descriptions
def profile(ranks, threads, extra=True):
    keys = ["fp32_fwd", "fp32_bwd", "bf16_fwd", "bf16_bwd"]
    p = {"ranks": ranks, "threads": threads, "gemm_dims": [64, 256, 1024, 4096],
         "gemm_gflops": {k: [[50.5 + i + j for j in range(4)] for i in range(4)] for k in keys},
         "attention_gflops": {k: [40.0, 60.0, 80.0] for k in keys}, "elementwise_gbs": 9.5,
         "comm": {c: {"latency_us": 0.8, "bandwidth_gbs": 2.5} for c in ["p2p", "alltoall", "allgather", "reduce_scatter", "allreduce"]}}
    if extra:
        p.update({"optimizer_gbs": 7.1, "loss_gbs": 6.2, "disk_gbs": 0.7,
                  "gemm_row_factor": {"rows": [64, 256, 1024, 4096, 16384], **{k: [0.6, 0.8, 1.0, 1.05, 1.1] for k in keys}},
                  "attention_length_factor": {"keys": [1024, 4096, 16384, 65536], **{k: [1.0, 0.95, 0.9, 0.85] for k in keys}},
                  "gemm_shapes": [{"op": "nt", "m": 1024, "n": 512, "k": 256, "openblas_gflops": 90.5, "onednn_gflops": 95.0}],
                  "from_run": ["gemm", "attention"], "cpu": "AMD EPYC (family 25 model 17, L2 1024 KiB)"})
    return p


put("fuzz_machine", "one_profile", json.dumps({"cpu": "AMD EPYC", "profiles": [profile(1, 2)]}, separators=(",", ":")))
put("fuzz_machine", "two_profiles", json.dumps({"cpu": "AMD EPYC", "profiles": [profile(2, 1), profile(1, 2, False)]}))
put("fuzz_machine", "old_profile", json.dumps({"cpu": "Other CPU", "profiles": [profile(4, 4, False)]}))
dict_("fuzz_machine", ["profiles", "ranks", "threads", "gemm_gflops", "attention_gflops", "fp32_fwd", "fp32_bwd", "bf16_fwd",
                       "bf16_bwd", "elementwise_gbs", "optimizer_gbs", "loss_gbs", "comm", "latency_us", "bandwidth_gbs",
                       "p2p", "alltoall", "allgather", "reduce_scatter", "allreduce", "disk_gbs", "gemm_row_factor",
                       "attention_length_factor", "gemm_shapes", "op", "openblas_gflops", "onednn_gflops", "from_run",
                       "cpu", "1e308", "-0", "0.0"])
for p in sorted(glob.glob(os.path.join(root, "hardware/*.json"))):
    h = json.load(open(p))
    put("fuzz_hardware", os.path.basename(p), json.dumps({k: v for k, v in h.items() if not k.endswith("_source")}))
    put("fuzz_hardware", "full_" + os.path.basename(p), open(p, "rb").read())
dict_("fuzz_hardware", ["name", "achievable_tflops", "fp32", "bf16", "attention_fraction", "memory_bandwidth_gbs",
                        "intra_node", "inter_node", "latency_us", "bandwidth_gbs", "devices_per_node",
                        "memory_per_device_gib", "disk_bandwidth_gbs", "host_link", "host_memory_bandwidth_gbs",
                        "1e308", "0.5"])

# ---- checkpoint: trainer_state.json [NUL checksums.json] (fuzz_checkpoint's fixed files)
fixed = {"config.json": b'{"fuzz": 1}\n', "model.safetensors": b"model", "optimizer.safetensors": b"optimizer",
         "adapter_config.json": b'{"peft_type": "LORA"}\n', "adapter_model.safetensors": b"adapter"}
state = json.dumps({"format": "longctx-checkpoint", "step": 12, "next_sample": 96, "seed": "1234", "data": "task:passkey",
                    "seq": 1024, "batch": 8, "pack": False, "schedule": {"lr": 0.001, "lr_min": 0, "warmup": 2, "steps": 100,
                    "weight_decay": 0.1, "clip": 1}, "layout": {"world": 2, "dp": 1, "cp": 2, "hp": 1, "ring_window": 2,
                    "placement": "head-first", "zero": 1, "zero_group": 2}}, indent="\t").encode()


def sums(names):
    files = dict(fixed, **{"trainer_state.json": state})
    return json.dumps({"files": {n: {"bytes": len(files[n]), "hash": "%016x" % hash64(files[n])} for n in names}}, indent=2).encode()


put("fuzz_checkpoint", "full", state + b"\0" + sums(["config.json", "model.safetensors", "optimizer.safetensors", "trainer_state.json"]))
put("fuzz_checkpoint", "lora", state + b"\0" + sums(["config.json", "adapter_config.json", "adapter_model.safetensors",
                                                     "optimizer.safetensors", "trainer_state.json"]))
put("fuzz_checkpoint", "no_checksums", state)
put("fuzz_checkpoint", "packed", state.replace(b'"pack": false', b'"pack": true'))
dict_("fuzz_checkpoint", ["format", "longctx-checkpoint", "step", "next_sample", "seed", "data", "seq", "batch", "pack",
                          "files", "bytes", "hash", "config.json", "model.safetensors", "optimizer.safetensors",
                          "trainer_state.json", "adapter_config.json", "adapter_model.safetensors", "1e300", "-1", "0.5"])

# ---- JSONL records (prepare)
put("fuzz_jsonl", "two", '{"text": "hello"}\n{"text": "world", "id": 2}\n')
put("fuzz_jsonl", "blank_lines", '\n  \t\n{"text": "a\\nb \\u00e9 \\ud83d\\ude00"}\n\n{"text": ""}  ')
put("fuzz_jsonl", "no_final_newline", '{"meta": {"x": [1, 2]}, "text": "last"}')
put("fuzz_jsonl", "bad_line", '{"text": "ok"}\n{"text": 3}\n')
copy("fuzz_jsonl", "tests/data/tok/corpus.jsonl")
dict_("fuzz_jsonl", ["text", '"\\"text\\": "', '"{\\"text\\": \\"\\"}"', '"\\\\u0000"', '"\\\\ud83d"', '"\\x0b"', '"\\x0c"'])

# ---- conversations (prepare --chat): byte 0 picks the template (mod 7, the order of
# fuzz_chat.c's families) and the loss modes, then one record; from the chat tests' records
# and the goldens' cases, each under two templates
N_FAM = 7
recs = [l.strip() for l in open(os.path.join(root, "tests/data/chat/convs.jsonl")) if l.strip()]
for i, fam in enumerate(["smollm2", "qwen25", "qwen3", "llama3", "llama31", "mistral", "llama2"]):
    g = json.load(open(os.path.join(root, "tests/data/chat/%s.json" % fam)))
    for k, c in enumerate(g["cases"][:6]):
        put("fuzz_chat", "%s_case%d" % (fam, k), bytes([i]) + json.dumps({"messages": c["messages"]}).encode())
for k, r in enumerate(recs):
    for i in (k % N_FAM, (k + 3) % N_FAM):
        put("fuzz_chat", "convs%d_t%d" % (k, i), bytes([i + N_FAM]) + r.encode())
copy("fuzz_chat", "tests/data/fuzz/chat_*")
dict_("fuzz_chat", ["messages", "role", "content", "system", "user", "assistant", "conversations", "from", "value",
                    "human", "gpt", "prompt", "completion", "<|im_start|>", "<|im_end|>", "<|eot_id|>", "<s>", "</s>",
                    "[INST]", "[/INST]", "<<SYS>>", "<think>", "</think>", '"\\\\u0000"', '"\\\\n"', '"\\x0a"'])

# The regression inputs of the JSON readers (tests/data/fuzz/<prefix>*, test_fuzz_regress)
for prefix, t in [("config_", "fuzz_config"), ("peft_", "fuzz_peft"), ("machine_", "fuzz_machine"),
                  ("hardware_", "fuzz_hardware"), ("ckpt_", "fuzz_checkpoint"), ("jsonl_", "fuzz_jsonl")]:
    copy(t, "tests/data/fuzz/" + prefix + "*")
