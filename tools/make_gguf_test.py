#!/usr/bin/env python3
"""Test data for longctx's GGUF reader (src/io/gguf.c, src/model/gguf_model.c), written by
the `gguf` Python package (llama.cpp's gguf-py) so the files are what llama.cpp's own
tools write.

Run once by hand from the repository root; the outputs are committed:

    python3 -m venv /tmp/ggvenv
    /tmp/ggvenv/bin/pip install gguf numpy safetensors
    /tmp/ggvenv/bin/python tools/make_gguf_test.py

Versions the committed data was made with: gguf 0.19.0, numpy 2.4.6, safetensors 0.8.0.
Reruns write byte-identical files (fixed seeds).

tests/data/gguf/:
  types.gguf        one tensor per readable ggml type (F32, F16, BF16, Q8_0, Q4_0, Q4_1,
                    Q5_0, Q5_1, Q4_K, Q5_K, Q6_K) as "q.TYPE" ([3, 512]: random block bytes
                    with finite random scales, so every bit pattern of the quants occurs;
                    F32/F16/BF16 include infinities, quiet NaNs, subnormals and -0), the
                    types gguf-py can quantize also as "qr.TYPE" (random normal data
                    quantized), a 3-D "q3d.Q8_0", and beside each "ref.NAME": its
                    dequantization by gguf.quants.dequantize as F32. general.alignment 64
                    and one metadata value of every GGUF value type (test.*).
  llama_f32.gguf    tests/data/golden_untied (config.json + model.safetensors) converted as
                    llama.cpp's convert_hf_to_gguf.py converts a LlamaForCausalLM: GGUF
                    names, q/k rows permuted (LlamaModel.permute), its metadata keys; F32.
  llama_q8_0.gguf   the same with --outtype q8_0's rule: 2-D tensors Q8_0, except those
                    whose rows are not whole 32-blocks (ffn_down, rows of 176), which the
                    converter falls back to F16; 1-D tensors F32.
  qwen2_f16.gguf    a tiny random Qwen2 (hidden 64, 2 layers, 4/2 heads, ffn 96, vocab
                    128; q/k/v biases, tied, no permutation, YaRN x4 from 4096): 2-D F16,
                    1-D F32; no qwen2.vocab_size (the vocabulary comes from
                    tokenizer.ggml.tokens). qwen2_hf/: the same model as a Hugging Face
                    directory (config.json, model.safetensors: the weights as the GGUF
                    stores them, F32).
  qwen3_bf16.gguf   a tiny random Qwen3 (q/k norms, head_dim 24 != 64 / 4, untied), 2-D
                    BF16; qwen3_hf/ likewise.
  llama3_rope.gguf  golden_untied's metadata with Llama 3.1 scaling (factor 8, low 1,
                    high 4, original 8192) stored as the converter stores it: only
                    rope_freqs.weight (generate_extra_tensors); no weights.
  llama3_badrope.gguf  rope_freqs.weight that no Llama 3 scaling gives.
tests/data/fuzz/gguf_*.bin: a small valid file and hand-made damaged ones (".ok." must
open, ".err." must be refused; test_fuzz_regress also cuts the valid one at every byte).
"""
import json
import math
import os
import struct
import sys

import numpy as np

import gguf
from gguf import GGMLQuantizationType as Q
from safetensors.numpy import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "tests", "data", "gguf")
FUZZ = os.path.join(ROOT, "tests", "data", "fuzz")

READABLE = [Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q4_K, Q.Q5_K, Q.Q6_K]
QUANTIZABLE = [Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_1, Q.Q5_0, Q.Q5_1]  # gguf-py quantizes these
# Byte offsets of each block type's f16 scale fields (ggml-common.h's block_* structs).
F16_FIELDS = {Q.Q4_0: [0], Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q8_0: [0],
              Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}


def write(path, w):
    w.write_header_to_file(path)
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print(f"wrote {os.path.relpath(path, ROOT)} ({os.path.getsize(path)} bytes)")


def random_blocks(rng, qtype, rows, cols):
    """[rows, bytes per row] uint8 of random blocks whose f16 scales are finite."""
    bs, ts = gguf.GGML_QUANT_SIZES[qtype]
    nb = rows * cols // bs
    raw = rng.integers(0, 256, size=(nb, ts), dtype=np.uint8)
    for off in F16_FIELDS[qtype]:
        # Scales of either sign over a wide range, some subnormal in f16.
        mag = np.exp(rng.uniform(np.log(1e-7), np.log(0.5), size=nb))
        d = (mag * rng.choice([-1.0, 1.0], size=nb)).astype(np.float16)
        raw[:, off:off + 2] = d.view(np.uint8).reshape(nb, 2)
    return raw.reshape(rows, cols // bs * ts)


def make_types():
    rng = np.random.default_rng(20261201)
    w = gguf.GGUFWriter(None, "test")
    w.add_custom_alignment(64)
    # One value of every metadata type.
    w.add_uint8("test.u8", 200)
    w.add_int8("test.i8", -5)
    w.add_uint16("test.u16", 65000)
    w.add_int16("test.i16", -30000)
    w.add_uint32("test.u32", 4000000000)
    w.add_int32("test.i32", -2000000000)
    w.add_float32("test.f32", 1.5)
    w.add_bool("test.bool", True)
    w.add_string("test.str", "h\u00e9llo")
    w.add_uint64("test.u64", 2 ** 63 + 5)
    w.add_int64("test.i64", -(2 ** 40))
    w.add_float64("test.f64", 0.1)
    w.add_array("test.arr_i32", [1, -2, 3])
    w.add_array("test.arr_str", ["a", "bc", "", "d\u00e9f"])
    w.add_array("test.arr_f32", [0.5, -0.25])
    w.add_key_value("test.arr_u8", [7, 8, 9], gguf.GGUFValueType.ARRAY, sub_type=gguf.GGUFValueType.UINT8)
    w.add_array("test.nested", [[1, 2], [3]])
    rows, cols = 3, 512
    for qt in READABLE:
        name = f"q.{qt.name}"
        if qt == Q.F32:
            x = rng.standard_normal((rows, cols)).astype(np.float32)
            bits = x.view(np.uint32)
            bits[0, :6] = [0x7F800000, 0xFF800000, 0x7FC00001, 0x80000000, 0x00000001, 0x807FFFFF]
            raw = x
            w.add_tensor(name, raw)
        elif qt in (Q.F16, Q.BF16):
            bits = rng.integers(0, 65536, size=(rows, cols), dtype=np.uint16)
            if qt == Q.F16:
                nan = (bits & 0x7C00) == 0x7C00
                bits[nan & ((bits & 0x3FF) != 0)] |= 0x200  # NaNs quiet
                bits[0, :5] = [0x7C00, 0xFC00, 0x8000, 0x0001, 0x03FF]
            else:
                nan = ((bits & 0x7F80) == 0x7F80) & ((bits & 0x7F) != 0)
                bits[nan] |= 0x40
                bits[0, :4] = [0x7F80, 0xFF80, 0x8000, 0x0001]
            raw = bits.view(np.uint8).reshape(rows, cols * 2)
            w.add_tensor(name, raw, raw_dtype=qt)
        else:
            raw = random_blocks(rng, qt, rows, cols)
            w.add_tensor(name, raw, raw_dtype=qt)
        ref = gguf.quants.dequantize(raw.view(np.uint8) if qt != Q.F32 else raw, qt).reshape(rows, cols)
        w.add_tensor("ref." + name, np.ascontiguousarray(ref, dtype=np.float32))
    for qt in QUANTIZABLE:
        x = (rng.standard_normal((rows, cols)) * rng.uniform(0.01, 2.0, size=(rows, 1))).astype(np.float32)
        raw = gguf.quants.quantize(x, qt)
        name = f"qr.{qt.name}"
        if qt == Q.F16:
            w.add_tensor(name, raw)
        else:
            w.add_tensor(name, raw, raw_dtype=qt)
        ref = gguf.quants.dequantize(raw.view(np.uint8) if qt != Q.F16 else raw, qt).reshape(rows, cols)
        w.add_tensor("ref." + name, np.ascontiguousarray(ref, dtype=np.float32))
    x = rng.standard_normal((2, 3, 64)).astype(np.float32)
    raw = gguf.quants.quantize(x, Q.Q8_0)
    w.add_tensor("q3d.Q8_0", raw, raw_dtype=Q.Q8_0)
    w.add_tensor("ref.q3d.Q8_0", np.ascontiguousarray(gguf.quants.dequantize(raw, Q.Q8_0).reshape(2, 3, 64)))
    write(os.path.join(OUT, "types.gguf"), w)


# ---------------------------------------------------------------- models

# HF name (after "model.layers.N.") -> GGUF name (after "blk.N."), as gguf-py's
# tensor_mapping maps them for llama / qwen2 / qwen3.
LAYER_NAMES = {
    "input_layernorm.weight": "attn_norm.weight",
    "self_attn.q_proj.weight": "attn_q.weight", "self_attn.q_proj.bias": "attn_q.bias",
    "self_attn.k_proj.weight": "attn_k.weight", "self_attn.k_proj.bias": "attn_k.bias",
    "self_attn.v_proj.weight": "attn_v.weight", "self_attn.v_proj.bias": "attn_v.bias",
    "self_attn.o_proj.weight": "attn_output.weight", "self_attn.o_proj.bias": "attn_output.bias",
    "self_attn.q_norm.weight": "attn_q_norm.weight", "self_attn.k_norm.weight": "attn_k_norm.weight",
    "post_attention_layernorm.weight": "ffn_norm.weight",
    "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
    "mlp.down_proj.weight": "ffn_down.weight",
}
GLOBAL_NAMES = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
                "lm_head.weight": "output.weight"}


def gguf_name(hf):
    if hf in GLOBAL_NAMES:
        return GLOBAL_NAMES[hf]
    parts = hf.split(".")
    assert parts[0] == "model" and parts[1] == "layers", hf
    return f"blk.{parts[2]}." + LAYER_NAMES[".".join(parts[3:])]


def permute(w, n_head):
    """llama.cpp convert_hf_to_gguf.py LlamaModel.permute (HF rotate-half -> GGML's
    interleaved pairs)."""
    return w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def add_model_meta(w, arch, c, name, file_type, vocab_key=True):
    w.add_type("model")
    w.add_name(name)
    w.add_block_count(c["num_hidden_layers"])
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    if "head_dim" in c:
        w.add_key_length(c["head_dim"])
        w.add_value_length(c["head_dim"])
    w.add_file_type(file_type)
    if vocab_key:
        w.add_vocab_size(c["vocab_size"])


def llama_config():
    with open(os.path.join(ROOT, "tests", "data", "golden_untied", "config.json")) as f:
        c = json.load(f)
    c["rope_theta"] = c.get("rope_theta", c.get("rope_parameters", {}).get("rope_theta", 10000.0))
    return c


def make_llama(outtype):
    c = llama_config()
    sd = load_file(os.path.join(ROOT, "tests", "data", "golden_untied", "model.safetensors"))
    w = gguf.GGUFWriter(None, "llama")
    add_model_meta(w, "llama", c, "Golden Untied (llama.cpp style)", 0 if outtype == "f32" else 7)
    w.add_rope_dimension_count(c["head_dim"])
    for hf in sorted(sd, key=lambda n: (n.count("layers"), n)):
        x = sd[hf].astype(np.float32)
        if hf.endswith(("q_proj.weight", "q_proj.bias")):
            x = permute(x, c["num_attention_heads"])
        if hf.endswith(("k_proj.weight", "k_proj.bias")):
            x = permute(x, c["num_key_value_heads"])
        x = np.ascontiguousarray(x)
        if outtype == "q8_0" and x.ndim == 2:
            if x.shape[-1] % 32 == 0:
                w.add_tensor(gguf_name(hf), gguf.quants.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
            else:  # the converter's fallback for rows that are not whole blocks
                w.add_tensor(gguf_name(hf), x.astype(np.float16))
        else:
            w.add_tensor(gguf_name(hf), x)
    write(os.path.join(OUT, f"llama_{outtype}.gguf"), w)


def tiny_weights(rng, c, qkv_bias, qk_norm):
    C, F, V, L = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["num_hidden_layers"]
    D = c["head_dim"]
    HQ, HKV = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
    sd = {"model.embed_tokens.weight": 0.3 * rng.standard_normal((V, C)),
          "model.norm.weight": 1 + 0.2 * rng.standard_normal(C)}
    if not c["tie_word_embeddings"]:
        sd["lm_head.weight"] = rng.standard_normal((V, C)) / math.sqrt(C)
    for l in range(L):
        p = f"model.layers.{l}."
        shapes = {"input_layernorm.weight": (C,), "post_attention_layernorm.weight": (C,),
                  "self_attn.q_proj.weight": (HQ, C), "self_attn.k_proj.weight": (HKV, C),
                  "self_attn.v_proj.weight": (HKV, C), "self_attn.o_proj.weight": (C, HQ),
                  "mlp.gate_proj.weight": (F, C), "mlp.up_proj.weight": (F, C), "mlp.down_proj.weight": (C, F)}
        if qkv_bias:
            shapes.update({"self_attn.q_proj.bias": (HQ,), "self_attn.k_proj.bias": (HKV,),
                           "self_attn.v_proj.bias": (HKV,)})
        if qk_norm:
            shapes.update({"self_attn.q_norm.weight": (D,), "self_attn.k_norm.weight": (D,)})
        for k, s in shapes.items():
            if k.endswith("norm.weight"):
                sd[p + k] = 1 + 0.2 * rng.standard_normal(s)
            elif len(s) == 1:
                sd[p + k] = 0.1 * rng.standard_normal(s)
            else:
                sd[p + k] = rng.standard_normal(s) / math.sqrt(s[1])
    return {k: v.astype(np.float32) for k, v in sd.items()}


def make_qwen(arch, seed):
    rng = np.random.default_rng(seed)
    qwen3 = arch == "qwen3"
    c = {"hidden_size": 64, "intermediate_size": 96, "num_hidden_layers": 2, "num_attention_heads": 4,
         "num_key_value_heads": 2, "head_dim": 24 if qwen3 else 16, "vocab_size": 128,
         "max_position_embeddings": 16384 if not qwen3 else 4096, "rope_theta": 1000000.0,
         "rms_norm_eps": 1e-6, "tie_word_embeddings": not qwen3}
    sd = tiny_weights(rng, c, qkv_bias=not qwen3, qk_norm=qwen3)
    w = gguf.GGUFWriter(None, arch)
    add_model_meta(w, arch, c, "Qwen2 Tiny (test)" if not qwen3 else "qwen3/tiny:test", 1 if not qwen3 else 32,
                   vocab_key=qwen3)
    if not qwen3:
        # YaRN as Qwen2Model.set_gguf_parameters writes it (type, factor, original length).
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(4.0)
        w.add_rope_scaling_orig_ctx_len(4096)
        # A byte vocabulary; the model's vocab size comes from this list's length.
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("qwen2")
        w.add_token_list([f"<0x{i:02X}>" for i in range(c["vocab_size"])])
        w.add_token_types([1] * c["vocab_size"])
    ref = {}
    for hf, x in sd.items():
        if x.ndim == 2:
            if qwen3:
                raw = gguf.quants.quantize(x, Q.BF16)
                w.add_tensor(gguf_name(hf), raw, raw_dtype=Q.BF16)
                ref[hf] = gguf.quants.dequantize(raw, Q.BF16).reshape(x.shape)
            else:
                h = x.astype(np.float16)
                w.add_tensor(gguf_name(hf), h)
                ref[hf] = h.astype(np.float32)
        else:
            w.add_tensor(gguf_name(hf), x)
            ref[hf] = x
    name = f"{arch}_{'bf16' if qwen3 else 'f16'}.gguf"
    write(os.path.join(OUT, name), w)
    # The same model as a Hugging Face directory (the weights as the GGUF stores them).
    d = os.path.join(OUT, f"{arch}_hf")
    os.makedirs(d, exist_ok=True)
    cfg = {"architectures": ["Qwen3ForCausalLM" if qwen3 else "Qwen2ForCausalLM"], "model_type": arch,
           "hidden_size": c["hidden_size"], "intermediate_size": c["intermediate_size"],
           "num_hidden_layers": c["num_hidden_layers"], "num_attention_heads": c["num_attention_heads"],
           "num_key_value_heads": c["num_key_value_heads"], "vocab_size": c["vocab_size"],
           "max_position_embeddings": c["max_position_embeddings"], "rope_theta": c["rope_theta"],
           "rms_norm_eps": c["rms_norm_eps"], "tie_word_embeddings": c["tie_word_embeddings"], "hidden_act": "silu",
           "torch_dtype": "float32"}
    if qwen3:
        cfg.update({"head_dim": c["head_dim"], "attention_bias": False})
    else:
        cfg["rope_scaling"] = {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 4096}
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)
        f.write("\n")
    rp = os.path.join(d, "model.safetensors")
    save_file({k: np.ascontiguousarray(v, dtype=np.float32) for k, v in ref.items()}, rp, metadata={"format": "pt"})
    os.chmod(rp, 0o644)
    print(f"wrote tests/data/gguf/{arch}_hf/")


def llama3_factors(dim, base, factor, low, high, orig):
    """convert_hf_to_gguf.py LlamaModel.generate_extra_tensors, in float32 as torch does."""
    freqs = (1.0 / (np.float32(base) ** (np.arange(0, dim, 2, dtype=np.float32) / np.float32(dim)))).astype(np.float32)
    out = []
    for freq in freqs:
        wavelen = np.float32(2 * math.pi) / freq
        if wavelen < orig / high:
            out.append(1)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (np.float32(orig) / wavelen - np.float32(low)) / np.float32(high - low)
            out.append(np.float32(1) / ((np.float32(1) - smooth) / np.float32(factor) + smooth))
    return np.array(out, dtype=np.float32)


def make_llama3_rope():
    c = llama_config()
    c["max_position_embeddings"] = 131072
    for name, ff in [("llama3_rope.gguf", llama3_factors(c["head_dim"], c["rope_theta"], 8.0, 1.0, 4.0, 8192)),
                     ("llama3_badrope.gguf", np.array([1, 1, 1, 1.7, 2.5, 5, 8, 8], dtype=np.float32))]:
        w = gguf.GGUFWriter(None, "llama")
        add_model_meta(w, "llama", c, "Llama 3.1 style RoPE", 0)
        w.add_rope_dimension_count(c["head_dim"])
        w.add_tensor("rope_freqs.weight", ff)
        write(os.path.join(OUT, name), w)
        print("   rope_freqs:", " ".join(f"{v:.6g}" for v in ff))


# ---------------------------------------------------------------- fuzz regression inputs

def s(b):
    b = b.encode() if isinstance(b, str) else b
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, payload):
    return s(key) + struct.pack("<I", vtype) + payload


def tinfo(name, dims, qtype, offset):
    return s(name) + struct.pack("<I", len(dims)) + b"".join(struct.pack("<Q", d) for d in dims) + \
        struct.pack("<IQ", qtype, offset)


def gguf_bytes(kvs, tis, data, align=32, version=3, magic=b"GGUF", n_t=None, n_kv=None):
    head = magic + struct.pack("<IQQ", version, len(tis) if n_t is None else n_t, len(kvs) if n_kv is None else n_kv)
    body = head + b"".join(kvs) + b"".join(tis)
    pad = (-len(body)) % align
    return body + b"\0" * pad + data


def make_fuzz():
    u32 = lambda v: struct.pack("<I", v)
    arch = kv("general.architecture", 8, s("llama"))
    toks = kv("tokenizer.ggml.tokens", 9, u32(8) + struct.pack("<Q", 3) + s("a") + s("b") + s("ab"))
    cnt = kv("llama.block_count", 4, u32(1))
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    q8 = gguf.quants.quantize(np.linspace(-1, 1, 64, dtype=np.float32).reshape(2, 32), Q.Q8_0).tobytes()
    data = f32 + b"\0" * 16 + q8 + b"\0" * ((-len(q8)) % 32)
    tis = [tinfo("v.weight", [4], 0, 0), tinfo("m.weight", [32, 2], 8, 32)]
    valid = gguf_bytes([arch, toks, cnt], tis, data)
    files = {"gguf_valid.ok.bin": valid}
    files["gguf_no_tensors.ok.bin"] = gguf_bytes([arch, cnt], [], b"")
    files["gguf_v2.ok.bin"] = gguf_bytes([arch, toks, cnt], tis, data, version=2)
    files["gguf_zero_dim.ok.bin"] = gguf_bytes([arch], [tinfo("z", [0, 3], 0, 0), tinfo("v", [4], 0, 0)], f32)
    files["gguf_unreadable_type.ok.bin"] = gguf_bytes([arch], [tinfo("iq", [256], 16, 0)], b"\0" * 66)
    files["gguf_align64.ok.bin"] = gguf_bytes([kv("general.alignment", 4, u32(64)), arch],
                                              [tinfo("a", [4], 0, 0), tinfo("b", [4], 0, 64)], f32 + b"\0" * 48 + f32,
                                              align=64)
    nested = struct.pack("<IQ", 9, 1)
    for _ in range(9):
        nested += struct.pack("<IQ", 9, 1)
    nested += struct.pack("<IQ", 4, 1) + u32(5)
    bad = {
        "gguf_bad_magic.err.bin": b"GGUX" + valid[4:],
        "gguf_v1.err.bin": gguf_bytes([arch], [], b"", version=1),
        "gguf_big_endian.err.bin": valid[:4] + struct.pack(">I", 3) + valid[8:],
        "gguf_v99.err.bin": gguf_bytes([arch], [], b"", version=99),
        "gguf_kv_count_huge.err.bin": gguf_bytes([arch, toks, cnt], tis, data, n_kv=1 << 60),
        "gguf_kv_count_extra.err.bin": gguf_bytes([arch, toks, cnt], tis, data, n_kv=4),
        "gguf_t_count_huge.err.bin": gguf_bytes([arch, toks, cnt], tis, data, n_t=1 << 40),
        "gguf_t_count_extra.err.bin": gguf_bytes([arch, toks, cnt], tis, data, n_t=3),
        "gguf_key_len_huge.err.bin": valid[:24] + struct.pack("<Q", 1 << 63) + valid[32:],
        "gguf_empty_key.err.bin": gguf_bytes([kv("", 4, u32(1))], [], b""),
        "gguf_nul_in_key.err.bin": gguf_bytes([kv("gen\0ral.x", 4, u32(1))], [], b""),
        "gguf_dup_key.err.bin": gguf_bytes([arch, cnt, cnt], [], b""),
        "gguf_bad_vtype.err.bin": gguf_bytes([kv("x", 13, u32(1))], [], b""),
        "gguf_str_len_huge.err.bin": gguf_bytes([kv("x", 8, struct.pack("<Q", (1 << 64) - 1))], [], b""),
        "gguf_arr_count_huge.err.bin": gguf_bytes([kv("x", 9, struct.pack("<IQ", 4, 1 << 62))], [], b""),
        "gguf_arr_str_count_huge.err.bin": gguf_bytes([kv("x", 9, struct.pack("<IQ", 8, 1 << 40) + s("a"))], [], b""),
        "gguf_arr_bad_type.err.bin": gguf_bytes([kv("x", 9, struct.pack("<IQ", 42, 1) + u32(0))], [], b""),
        "gguf_nested_deep.err.bin": gguf_bytes([kv("x", 9, nested)], [], b""),
        "gguf_bad_alignment.err.bin": gguf_bytes([kv("general.alignment", 4, u32(3)), arch], [], b""),
        "gguf_alignment_string.err.bin": gguf_bytes([kv("general.alignment", 8, s("32")), arch], [], b""),
        "gguf_ndims_0.err.bin": gguf_bytes([arch], [tinfo("t", [], 0, 0)], f32),
        "gguf_ndims_5.err.bin": gguf_bytes([arch], [tinfo("t", [1, 1, 1, 1, 4], 0, 0)], f32),
        "gguf_dim_overflow.err.bin": gguf_bytes([arch], [tinfo("t", [1 << 31, 1 << 31, 1 << 31], 0, 0)], f32),
        "gguf_dim_huge.err.bin": gguf_bytes([arch], [tinfo("t", [(1 << 64) - 1], 0, 0)], f32),
        "gguf_unknown_type.err.bin": gguf_bytes([arch], [tinfo("t", [4], 4, 0)], f32),
        "gguf_type_99.err.bin": gguf_bytes([arch], [tinfo("t", [4], 99, 0)], f32),
        "gguf_row_not_blocks.err.bin": gguf_bytes([arch], [tinfo("t", [33, 2], 8, 0)], b"\0" * 128),
        "gguf_offset_past_end.err.bin": gguf_bytes([arch], [tinfo("t", [4], 0, 1 << 20)], f32),
        "gguf_offset_wrap.err.bin": gguf_bytes([arch], [tinfo("t", [4], 0, (1 << 64) - 32)], f32),
        "gguf_size_past_end.err.bin": gguf_bytes([arch], [tinfo("t", [8], 0, 0)], f32),
        "gguf_misaligned.err.bin": gguf_bytes([arch], [tinfo("t", [1], 0, 4)], f32),
        "gguf_dup_tensor.err.bin": gguf_bytes([arch], [tinfo("t", [4], 0, 0), tinfo("t", [4], 0, 0)], f32),
        "gguf_empty_name.err.bin": gguf_bytes([arch], [tinfo("", [4], 0, 0)], f32),
        "gguf_name_long.err.bin": gguf_bytes([arch], [tinfo("n" * 300, [4], 0, 0)], f32),
        "gguf_nul_in_name.err.bin": gguf_bytes([arch], [tinfo("a\0b", [4], 0, 0)], f32),
        "gguf_truncated_data.err.bin": valid[:-40],
        "gguf_header_only.err.bin": valid[:24],
        "gguf_short.err.bin": valid[:10],
    }
    files.update(bad)
    for name, b in sorted(files.items()):
        with open(os.path.join(FUZZ, name), "wb") as f:
            f.write(b)
    print(f"wrote {len(files)} files tests/data/fuzz/gguf_*.bin")
    # gguf-py reads the valid ones as the C reader must.
    for name in files:
        if ".ok." in name:
            gguf.GGUFReader(os.path.join(FUZZ, name))


def main():
    os.makedirs(OUT, exist_ok=True)
    make_types()
    make_llama("f32")
    make_llama("q8_0")
    make_qwen("qwen2", 2024)
    make_qwen("qwen3", 2025)
    make_llama3_rope()
    make_fuzz()
    return 0


if __name__ == "__main__":
    sys.exit(main())
