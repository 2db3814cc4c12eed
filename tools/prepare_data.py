#!/usr/bin/env python3
"""Turn text or JSONL into a longctx token file.

    prepare_data.py --tokenizer DIR_OR_tokenizer.json --out data.tok [--eos-id N | --eos TOKEN] INPUT...
    prepare_data.py --tokenizer MODEL.gguf --out data.tok [--eos-id N | --eos TOKEN] INPUT...
    prepare_data.py --bytes --out data.tok INPUT...
    prepare_data.py --tokenizer MODEL_DIR_OR.gguf --chat [--train-on assistant|last|all] [--strict] --out data.tok CONVERSATIONS.jsonl
    prepare_data.py --self-test

Each INPUT is a text file (the whole file is one document) or a JSONL file (``.jsonl``/
``.jsonl.gz``, or ``--format jsonl``: one JSON object per line, its ``--field`` (default
"text") is one document). Documents are tokenized with a Hugging Face ``tokenizers``
tokenizer (``Tokenizer.from_file(tokenizer.json)``; no special tokens are added unless
``--add-special-tokens``) or, with ``--bytes``, as UTF-8 bytes (vocab 256). If an EOS id
is given, it is appended after every document, so documents stay separated.

A GGUF model file (llama.cpp's format) as ``--tokenizer`` builds the same kind of
``tokenizers`` tokenizer from the vocabulary it carries (``tokenizer.ggml.*`` metadata,
read here without other packages): model "gpt2" is byte-level BPE from the tokens and
merges, with the pre-tokenizer of the model family that ``tokenizer.ggml.pre`` names (the
regular expressions llama.cpp uses for it, which are those of the family's
tokenizer.json); model "llama" is SentencePiece BPE from the tokens and their scores (merges
rebuilt from the vocabulary as transformers' converter does, byte fallback). Control and
user-defined tokens are added tokens, so the ids match the model's own Hugging Face
tokenizer.

Output (all little-endian): magic "LCTOKENS", uint32 version 2, uint32 bytes per token (2
for vocab <= 65536, else 4), uint32 vocab size, uint32 flags 1 (a document index
follows), uint64 token count, the tokens, then the document index: uint64 number of
documents and one uint64 start (token index) per document, so `longctx train --pack` can
pack whole documents. Documents that give no token are left out of the index. The file is
written atomically (temporary name, fsync, rename).

``--chat``: each JSONL line is a conversation (OpenAI ``messages``, ShareGPT
``conversations`` with from system/human/gpt, or ``prompt``/``completion``: one user and one
assistant turn), rendered with the model's own chat template (``chat_template.jinja`` beside
tokenizer.json, ``tokenizer_config.json``'s ``chat_template``, or a GGUF's
``tokenizer.chat_template``) by jinja2 as transformers' ``apply_chat_template`` does, and
tokenized without the tokenizer's own special tokens (as ``apply_chat_template(tokenize=True)``).
Any template renders here; ``longctx prepare --chat`` renders the common forms in C and
writes the same file byte for byte. The file is version 3: after the tokens, one loss-mask
byte per token, 1 where the token counts. With ``--train-on assistant`` (default) each
assistant turn counts from the tokens of the conversation before it rendered with the
generation prompt through the first end-of-turn token after them (``<|im_end|>``,
``<|eot_id|>``, else the EOS); ``last``: only the final assistant turn; ``all``: every token.
A conversation with no assistant turn is skipped and counted (``--strict``: refused).
"""
import argparse
import array
import gzip
import json
import os
import struct
import sys

MAGIC = b"LCTOKENS"
VERSION = 2
HAS_DOCS = 1
HEADER = struct.Struct("<8sIIIIQ")  # 32 bytes


class PrepError(Exception):
    pass


def open_text(path):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, "r", encoding="utf-8")


def iter_documents(path, fmt, field):
    if fmt == "auto":
        fmt = "jsonl" if path.endswith((".jsonl", ".jsonl.gz", ".ndjson")) else "text"
    try:
        with open_text(path) as f:
            if fmt == "text":
                yield f.read()
                return
            for lineno, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as e:
                    raise PrepError(f"{path}:{lineno}: not valid JSON ({e.msg}); each line of a "
                                    f"JSONL file must be one JSON object")
                if not isinstance(obj, dict) or field not in obj:
                    raise PrepError(f"{path}:{lineno}: no field \"{field}\"; choose the text "
                                    f"field with --field")
                if not isinstance(obj[field], str):
                    raise PrepError(f"{path}:{lineno}: field \"{field}\" is not a string")
                yield obj[field]
    except UnicodeDecodeError as e:
        raise PrepError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})")
    except OSError as e:
        raise PrepError(f"{path}: cannot read ({e.strerror or e})")


class ByteEncoder:
    vocab = 256

    def encode_batch(self, docs):
        return [list(d.encode("utf-8")) for d in docs]


class HFEncoder:
    def __init__(self, path, add_special):
        try:
            from tokenizers import Tokenizer
        except ImportError:
            raise PrepError("the tokenizers package is missing: pip install tokenizers "
                            "(or use --bytes)")
        if os.path.isdir(path):
            path = os.path.join(path, "tokenizer.json")
        if not os.path.isfile(path):
            raise PrepError(f"{path}: no such tokenizer file; give tokenizer.json or the model "
                            f"directory holding it")
        try:
            self.tok = Tokenizer.from_file(path)
        except Exception as e:  # the library raises plain Exceptions
            raise PrepError(f"{path}: cannot load the tokenizer ({e})")
        self.vocab = self.tok.get_vocab_size(with_added_tokens=True)
        self.add_special = add_special

    def encode_batch(self, docs):
        encs = self.tok.encode_batch(docs, add_special_tokens=self.add_special)
        return [e.ids for e in encs]

    def token_id(self, token):
        i = self.tok.token_to_id(token)
        if i is None:
            raise PrepError(f"--eos {token!r} is not a token of this tokenizer; give --eos-id")
        return i


# ---------------------------------------------------------------- GGUF vocabularies

GGUF_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
                12: "<d"}


def read_gguf_metadata(path, want=lambda key: key.startswith("tokenizer.") or key == "general.architecture"):
    """{key: value} of a GGUF file's metadata for the keys `want` accepts (strings as str,
    arrays as lists); the tensor data is never read."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise PrepError(f"{path}: cannot read ({e.strerror or e})")
    with f:
        def take(n):
            b = f.read(n)
            if len(b) != n:
                raise PrepError(f"{path}: truncated GGUF metadata")
            return b

        def u32():
            return struct.unpack("<I", take(4))[0]

        def u64():
            return struct.unpack("<Q", take(8))[0]

        def string(keep=True):
            n = u64()
            if not keep:
                f.seek(n, 1)
                return None
            try:
                return take(n).decode("utf-8")
            except UnicodeDecodeError:
                raise PrepError(f"{path}: a metadata string is not UTF-8")

        def value(t, keep, depth=0):
            if t in GGUF_SCALARS:
                fmt = GGUF_SCALARS[t]
                v = struct.unpack(fmt, take(struct.calcsize(fmt)))[0]
                return v if keep else None
            if t == 8:
                return string(keep)
            if t == 9 and depth < 8:
                at, n = u32(), u64()
                if at in GGUF_SCALARS and at != 7:
                    fmt = GGUF_SCALARS[at]
                    size = struct.calcsize(fmt)
                    if not keep:
                        f.seek(n * size, 1)
                        return None
                    return list(struct.unpack(f"<{n}{fmt[1]}", take(n * size)))
                return [value(at, keep, depth + 1) for _ in range(n)] if keep else [value(at, False, depth + 1) for _ in range(n)]
            raise PrepError(f"{path}: unknown GGUF metadata value type {t}")

        if take(4) != b"GGUF":
            raise PrepError(f"{path}: not a GGUF file")
        version = u32()
        if version not in (2, 3):
            raise PrepError(f"{path}: GGUF version {version} is not supported (2 and 3 are)")
        u64()  # tensors
        n_kv = u64()
        out = {}
        for _ in range(n_kv):
            key = string()
            t = u32()
            keep = want(key)
            v = value(t, keep)
            if keep:
                out[key] = v
        return out


def is_gguf(path):
    try:
        with open(path, "rb") as f:
            return f.read(4) == b"GGUF"
    except OSError:
        return False


# llama.cpp's pre-tokenizer names (tokenizer.ggml.pre; llama-vocab.cpp) -> the regular
# expressions it splits with, which are the Split / ByteLevel pre-tokenizers of each
# family's tokenizer.json. Digits: split every digit apart first (StarCoder, SmolLM).
GPT2_RE = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""
LLAMA3_RE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
             r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
QWEN2_RE = (r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"""
            r"""\s*[\r\n]+|\s+(?!\S)|\s+""")
PRE_TOKENIZERS = {
    # name: (regex, split digits one by one first, NFC normalizer, ignore_merges)
    "default": (GPT2_RE, False, False, False), "gpt-2": (GPT2_RE, False, False, False),
    "gpt2": (GPT2_RE, False, False, False), "phi-2": (GPT2_RE, False, False, False),
    "smollm": (GPT2_RE, True, False, False), "starcoder": (GPT2_RE, True, False, False),
    "refact": (GPT2_RE, True, False, False), "codeshell": (GPT2_RE, True, False, False),
    "llama3": (LLAMA3_RE, False, False, True), "llama-v3": (LLAMA3_RE, False, False, True),
    "llama-bpe": (LLAMA3_RE, False, False, True), "smaug-bpe": (LLAMA3_RE, False, False, False),
    "dbrx": (LLAMA3_RE, False, False, False),
    "qwen2": (QWEN2_RE, False, True, False), "deepseek-r1-qwen": (QWEN2_RE, False, True, False),
}

TOKEN_CONTROL, TOKEN_USER_DEFINED = 3, 4


class GGUFEncoder:
    """A `tokenizers` tokenizer from the vocabulary of a GGUF model file."""

    def __init__(self, path, add_special):
        try:
            from tokenizers import Tokenizer, AddedToken, Regex, decoders, models, normalizers, pre_tokenizers
        except ImportError:
            raise PrepError("the tokenizers package is missing: pip install tokenizers (or use --bytes)")
        meta = read_gguf_metadata(path)
        kind = meta.get("tokenizer.ggml.model")
        tokens = meta.get("tokenizer.ggml.tokens")
        if not kind or not tokens:
            raise PrepError(f"{path}: the GGUF file holds no tokenizer (tokenizer.ggml.model and tokens); give "
                            f"the model's tokenizer.json")
        types = meta.get("tokenizer.ggml.token_type") or [1] * len(tokens)
        vocab = {t: i for i, t in enumerate(tokens)}
        if kind == "gpt2":
            pre = meta.get("tokenizer.ggml.pre", "default")
            if pre not in PRE_TOKENIZERS:
                raise PrepError(f"{path}: tokenizer.ggml.pre '{pre}' is not known here (known: "
                                f"{', '.join(sorted(PRE_TOKENIZERS))}); give the model's tokenizer.json")
            regex, digits, nfc, ignore_merges = PRE_TOKENIZERS[pre]
            merges = [tuple(m.split(" ", 1)) for m in meta.get("tokenizer.ggml.merges", [])]
            tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, ignore_merges=ignore_merges))
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
            add_bos_default = False
        elif kind == "llama":
            scores = meta.get("tokenizer.ggml.scores") or [0.0] * len(tokens)
            # SentencePiece BPE as transformers' LlamaConverter builds it: merges are every
            # split of a piece into two pieces, ranked by the merged piece's score.
            merges = []
            for piece, i in vocab.items():
                if types[i] != 1:
                    continue
                for k in range(1, len(piece)):
                    a, b = piece[:k], piece[k:]
                    if a in vocab and b in vocab:
                        merges.append((-scores[i], vocab[a], vocab[b], a, b))
            merges.sort()
            unk = meta.get("tokenizer.ggml.unknown_token_id", 0)
            tok = Tokenizer(models.BPE(vocab=vocab, merges=[(m[3], m[4]) for m in merges],
                                       unk_token=tokens[unk] if 0 <= unk < len(tokens) else None,
                                       fuse_unk=True, byte_fallback=True))
            steps = [normalizers.Replace(" ", "\u2581")]
            if meta.get("tokenizer.ggml.add_space_prefix", True):
                steps.insert(0, normalizers.Prepend("\u2581"))
            tok.normalizer = normalizers.Sequence(steps)
            tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(), decoders.Fuse(),
                                             decoders.Strip(" ", 1, 0)])
            add_bos_default = True
        else:
            raise PrepError(f"{path}: tokenizer model '{kind}' is not supported (gpt2 and llama are); give the "
                            f"model's tokenizer.json")
        added = [AddedToken(t, special=types[i] == TOKEN_CONTROL, normalized=False)
                 for i, t in enumerate(tokens) if types[i] in (TOKEN_CONTROL, TOKEN_USER_DEFINED)]
        if added:
            tok.add_tokens(added)
        self.tok = tok
        self.vocab = len(tokens)
        self.add_special = add_special
        self.bos = meta.get("tokenizer.ggml.bos_token_id") if meta.get("tokenizer.ggml.add_bos_token",
                                                                         add_bos_default) else None
        self.eos = meta.get("tokenizer.ggml.eos_token_id") if meta.get("tokenizer.ggml.add_eos_token", False) else None

    def encode_batch(self, docs):
        encs = self.tok.encode_batch(docs, add_special_tokens=False)
        out = []
        for e in encs:
            ids = list(e.ids)
            if self.add_special:
                ids = ([self.bos] if self.bos is not None else []) + ids + ([self.eos] if self.eos is not None else [])
            out.append(ids)
        return out

    def token_id(self, token):
        i = self.tok.token_to_id(token)
        if i is None:
            raise PrepError(f"--eos {token!r} is not a token of this tokenizer; give --eos-id")
        return i


def fsync_dir(path):
    d = os.path.dirname(os.path.abspath(path))
    try:
        fd = os.open(d, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def write_tokens(out, enc, doc_iter, eos, bytes_per_token, batch_docs=256):
    """Streams the documents' tokens into OUT atomically, then the document index.
    Returns (documents, tokens)."""
    typecode = "H" if bytes_per_token == 2 else "I"
    if array.array(typecode).itemsize != bytes_per_token:
        typecode = "L" if bytes_per_token == 4 else typecode
    tmp = f"{out}.tmp.{os.getpid()}"
    ndocs = ntoks = 0
    starts = array.array("Q")
    try:
        with open(tmp, "wb") as f:
            f.write(HEADER.pack(MAGIC, VERSION, bytes_per_token, enc.vocab, HAS_DOCS, 0))
            batch = []

            def flush(batch):
                nonlocal ntoks
                for ids in enc.encode_batch(batch):
                    if eos is not None:
                        ids = list(ids) + [eos]
                    if ids:
                        starts.append(ntoks)
                    a = array.array(typecode, ids)
                    if sys.byteorder == "big":
                        a.byteswap()
                    f.write(a.tobytes())
                    ntoks += len(ids)

            for doc in doc_iter:
                batch.append(doc)
                ndocs += 1
                if len(batch) >= batch_docs:
                    flush(batch)
                    batch = []
            if batch:
                flush(batch)
            if ntoks == 0:
                raise PrepError("the input holds no tokens; a token file needs at least one")
            if sys.byteorder == "big":
                starts.byteswap()
            f.write(struct.pack("<Q", len(starts)))
            f.write(starts.tobytes())
            f.seek(0)
            f.write(HEADER.pack(MAGIC, VERSION, bytes_per_token, enc.vocab, HAS_DOCS, ntoks))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, out)
        fsync_dir(out)
    except OverflowError:
        raise PrepError(f"a token id does not fit {bytes_per_token}-byte tokens; use "
                        f"--bytes-per-token 4")
    except OSError as e:
        raise PrepError(f"{out}: cannot write ({e.strerror or e}); the previous file (if any) "
                        f"is untouched")
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return ndocs, ntoks


# ---------------------------------------------------------------- conversations (--chat)

ROLES = {"messages": {"system": "system", "user": "user", "assistant": "assistant"},
         "conversations": {"system": "system", "human": "user", "user": "user", "gpt": "assistant",
                           "assistant": "assistant"}}


def parse_conversation(obj):
    """[{"role", "content"}] of one record (the same rules as src/io/conv.c)."""
    if not isinstance(obj, dict):
        raise ValueError("the record is not a JSON object")
    field = "messages" if "messages" in obj else "conversations" if "conversations" in obj else None
    if field is None:
        if "prompt" not in obj and "completion" not in obj:
            raise ValueError('the record has no "messages" (OpenAI), "conversations" (ShareGPT) or '
                             '"prompt"/"completion" field')
        if not isinstance(obj.get("prompt"), str) or not isinstance(obj.get("completion"), str):
            raise ValueError('a prompt/completion record needs both "prompt" and "completion" as strings')
        return [{"role": "user", "content": obj["prompt"]}, {"role": "assistant", "content": obj["completion"]}]
    turns = obj[field]
    if not isinstance(turns, list):
        raise ValueError(f'"{field}" is not a list of turns')
    if not turns:
        raise ValueError(f'"{field}" is an empty list: the record has no turns')
    kr, kc = ("role", "content") if field == "messages" else ("from", "value")
    out = []
    for i, t in enumerate(turns, 1):
        if not isinstance(t, dict) or not isinstance(t.get(kr), str) or not isinstance(t.get(kc), str):
            raise ValueError(f'turn {i} of "{field}" is not an object with string "{kr}" and "{kc}"')
        role = ROLES[field].get(t[kr])
        if role is None:
            raise ValueError(f'turn {i} has the unknown {kr} "{t[kr][:40]}"')
        if role == "system" and i > 1:
            raise ValueError(f"turn {i} is a system turn, but only the first turn may be one")
        out.append({"role": role, "content": t[kc].split("\0")[0]})
    return out


def find_chat_template(path, meta=None):
    """(template source, bos token, eos token) of a model directory, tokenizer.json or GGUF."""
    if meta is not None:
        toks = meta.get("tokenizer.ggml.tokens") or []

        def tok(key):
            i = meta.get(key)
            return toks[i] if i is not None and 0 <= i < len(toks) else ""
        tpl = meta.get("tokenizer.chat_template")
        return tpl, tok("tokenizer.ggml.bos_token_id"), tok("tokenizer.ggml.eos_token_id")
    d = path if os.path.isdir(path) else os.path.dirname(os.path.abspath(path))
    tpl, bos, eos = None, "", ""
    cfg = os.path.join(d, "tokenizer_config.json")
    if os.path.isfile(cfg):
        with open(cfg, encoding="utf-8") as f:
            c = json.load(f)
        tpl = c.get("chat_template")
        if isinstance(tpl, list):
            tpl = next((t["template"] for t in tpl if t.get("name") == "default"), None)

        def s(x):
            return x.get("content", "") if isinstance(x, dict) else (x or "")
        bos, eos = s(c.get("bos_token")), s(c.get("eos_token"))
    jinja = os.path.join(d, "chat_template.jinja")
    if os.path.isfile(jinja):
        with open(jinja, encoding="utf-8") as f:
            tpl = f.read()
    return tpl, bos, eos


def make_renderer(tpl, bos, eos):
    """A function (messages, add_generation_prompt) -> text, rendering as transformers does."""
    try:
        import jinja2
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError:
        raise PrepError("--chat needs jinja2: pip install jinja2")
    import datetime

    def raise_exception(msg):
        raise jinja2.exceptions.TemplateError(msg)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.datetime.now().strftime(fmt)
    t = env.from_string(tpl)

    def render(messages, add_generation_prompt):
        try:
            return t.render(messages=messages, add_generation_prompt=add_generation_prompt, bos_token=bos,
                            eos_token=eos, tools=None, documents=None)
        except jinja2.exceptions.TemplateError as e:
            raise ValueError(f"the chat template refuses the conversation: {e}")
    return render


def chat_encode(render, encode, eot, messages, train_on):
    """(ids, mask) of one conversation."""
    ids = encode(render(messages, False))
    mask = [1 if train_on == "all" else 0] * len(ids)
    turns = [i for i, m in enumerate(messages) if m["role"] == "assistant"]
    if train_on == "last":
        turns = turns[-1:]
    for i in turns if train_on != "all" else []:
        k = len(encode(render(messages[:i], True)))
        while k < len(ids):
            mask[k] = 1
            if ids[k] == eot:
                break
            k += 1
    return ids, mask


def write_chat(a, enc):
    meta = read_gguf_metadata(a.tokenizer) if isinstance(enc, GGUFEncoder) else None
    tpl, bos, eos = find_chat_template(a.tokenizer, meta)
    if not tpl:
        raise PrepError("the model's tokenizer has no chat template (a base model?); conversations need an instruct "
                        "model's template")
    render = make_renderer(tpl, bos, eos)
    eot_s = "<|im_end|>" if "<|im_end|>" in tpl else "<|eot_id|>" if "<|eot_id|>" in tpl else eos or "</s>"
    eot = enc.tok.token_to_id(eot_s)
    if eot is None:
        raise PrepError(f"the chat template ends a turn with {eot_s}, which is not a token of this tokenizer")

    def encode(text):
        return enc.tok.encode(text, add_special_tokens=False).ids
    toks, mask, starts, skipped, ndocs = [], bytearray(), [], 0, 0
    for path in a.inputs:
        if not (a.format == "jsonl" or (a.format == "auto" and path.endswith((".jsonl", ".jsonl.gz", ".ndjson")))):
            raise PrepError(f"{path}: --chat reads JSONL conversations (.jsonl, .jsonl.gz, .ndjson or --format jsonl)")
        try:
            with open_text(path) as f:
                lines = list(f)
        except (OSError, UnicodeDecodeError) as e:
            raise PrepError(f"{path}: cannot read ({e})")
        for lineno, line in enumerate(lines, 1):
            if not line.strip(" \t\f\v\n"):
                continue
            try:
                obj = json.loads(line)
                msgs = parse_conversation(obj)
                if not any(m["role"] == "assistant" for m in msgs):
                    if a.strict:
                        raise ValueError("the conversation has no assistant turn, so no token would count")
                    skipped += 1
                    continue
                ids, m = chat_encode(render, encode, eot, msgs, a.train_on)
            except json.JSONDecodeError as e:
                raise PrepError(f"{path}:{lineno}: not valid JSON ({e.msg}); each line of a JSONL file must be one "
                                f"JSON object")
            except ValueError as e:
                raise PrepError(f"{path}:{lineno}: {e}")
            ndocs += 1
            if ids:
                starts.append(len(toks))
            toks += ids
            mask += bytes(m)
    if not toks:
        raise PrepError("the input holds no tokens; a token file needs at least one")
    counted = sum(mask)
    if not counted:
        raise PrepError("no token counts: the conversations have no assistant tokens to train on")
    bpt = a.bytes_per_token or (2 if enc.vocab <= 65536 else 4)
    if bpt == 2 and max(toks) >= 65536:
        raise PrepError(f"vocab {enc.vocab} does not fit 2-byte tokens; use --bytes-per-token 4")
    arr = array.array("H" if bpt == 2 else "I", toks)
    if arr.itemsize != bpt:
        arr = array.array("L", toks)
    ix = array.array("Q", starts)
    if sys.byteorder == "big":
        arr.byteswap()
        ix.byteswap()
    tmp = f"{a.out}.tmp.{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(HEADER.pack(MAGIC, 3, bpt, enc.vocab, HAS_DOCS, len(toks)))
            f.write(arr.tobytes())
            f.write(bytes(mask))
            f.write(struct.pack("<Q", len(starts)))
            f.write(ix.tobytes())
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, a.out)
        fsync_dir(a.out)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    print(f"{a.out}: {len(toks)} tokens from {ndocs} documents, vocab {enc.vocab}, {bpt} bytes per token")
    print(f"{a.out}: {counted} of {len(toks)} tokens count ({100.0 * counted / len(toks):.1f}%, --train-on "
          f"{a.train_on}); {skipped} conversations skipped (no assistant turn)")
    return 0


def read_token_file(path, with_docs=False, with_mask=False):
    """(vocab, bytes_per_token, tokens[, document starts]) of a token file; for tests and
    inspection."""
    with open(path, "rb") as f:
        data = f.read()
    magic, ver, bpt, vocab, flags, count = HEADER.unpack_from(data)
    if magic != MAGIC or ver not in (1, 2, 3) or bpt not in (2, 4) or (ver == 1 and flags != 0):
        raise PrepError(f"{path}: not a longctx token file")
    end = HEADER.size + count * bpt
    a = array.array("H" if bpt == 2 else "I")
    if a.itemsize != bpt:
        a = array.array("L")
    a.frombytes(data[HEADER.size:end])
    if sys.byteorder == "big":
        a.byteswap()
    starts = []
    mask = [1] * count
    if ver == 3:
        mask = list(data[end:end + count])
        if len(mask) != count:
            raise PrepError(f"{path}: the loss mask is shorter than the tokens")
        end += count
    if ver >= 2 and flags & HAS_DOCS:
        (n,) = struct.unpack_from("<Q", data, end)
        starts = list(struct.unpack_from(f"<{n}Q", data, end + 8))
        end += 8 + 8 * n
    if len(data) != end:
        raise PrepError(f"{path}: size {len(data)} does not match {count} tokens and the index")
    if with_mask:
        return vocab, bpt, list(a), starts, mask
    return (vocab, bpt, list(a), starts) if with_docs else (vocab, bpt, list(a))


def run(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("inputs", nargs="*", help="text or JSONL files")
    p.add_argument("--out", help="token file to write")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--tokenizer", help="tokenizer.json, a model directory holding it, or a GGUF model file")
    src.add_argument("--bytes", action="store_true", help="UTF-8 bytes as tokens (vocab 256)")
    p.add_argument("--eos-id", type=int, help="token id appended after every document")
    p.add_argument("--eos", help="token (e.g. '</s>') appended after every document")
    p.add_argument("--format", choices=["auto", "text", "jsonl"], default="auto")
    p.add_argument("--field", default="text", help="JSONL field holding the text (default text)")
    p.add_argument("--add-special-tokens", action="store_true",
                   help="let the tokenizer add its special tokens (e.g. BOS) to each document")
    p.add_argument("--bytes-per-token", type=int, choices=[2, 4],
                   help="default: 2 when the vocab fits 65536 ids, else 4")
    p.add_argument("--chat", action="store_true",
                   help="JSONL conversations in the model's chat template, with a loss mask (version 3)")
    p.add_argument("--train-on", choices=["assistant", "last", "all"], default="assistant",
                   help="--chat: the tokens that count (default: every assistant turn)")
    p.add_argument("--strict", action="store_true", help="--chat: refuse a conversation with no assistant turn")
    p.add_argument("--self-test", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.self_test:
        return self_test()
    if not a.out or not a.inputs:
        p.error("give --out FILE and at least one input file")
    if not a.tokenizer and not a.bytes:
        p.error("give --tokenizer tokenizer.json (or a model directory) or --bytes")
    if a.bytes:
        enc = ByteEncoder()
    elif a.tokenizer.endswith(".gguf") or (os.path.isfile(a.tokenizer) and is_gguf(a.tokenizer)):
        enc = GGUFEncoder(a.tokenizer, a.add_special_tokens)
    else:
        enc = HFEncoder(a.tokenizer, a.add_special_tokens)
    if a.chat:
        if a.bytes:
            raise PrepError("--chat needs the model's tokenizer and chat template: give --tokenizer, not --bytes")
        if a.eos is not None or a.eos_id is not None or a.add_special_tokens:
            raise PrepError("--chat writes the template's own special tokens: leave out --eos, --eos-id and "
                            "--add-special-tokens")
        return write_chat(a, enc)
    eos = a.eos_id
    if a.eos is not None:
        if a.bytes:
            raise PrepError("--eos needs a tokenizer; with --bytes give --eos-id")
        eos = enc.token_id(a.eos)
    if eos is not None and not 0 <= eos < enc.vocab:
        raise PrepError(f"--eos-id {eos} is outside the vocabulary [0, {enc.vocab})")
    bpt = a.bytes_per_token or (2 if enc.vocab <= 65536 else 4)
    if bpt == 2 and enc.vocab > 65536:
        raise PrepError(f"vocab {enc.vocab} does not fit 2-byte tokens; use --bytes-per-token 4")

    def docs():
        for path in a.inputs:
            yield from iter_documents(path, a.format, a.field)

    ndocs, ntoks = write_tokens(a.out, enc, docs(), eos, bpt)
    print(f"{a.out}: {ntoks} tokens from {ndocs} documents, vocab {enc.vocab}, "
          f"{bpt} bytes per token")
    return 0


def main(argv=None):
    try:
        return run(sys.argv[1:] if argv is None else argv)
    except PrepError as e:
        print(f"prepare_data: error: {e}", file=sys.stderr)
        return 1


def write_test_gguf(path, kv):
    """A metadata-only GGUF (strings, ints, lists of strings or ints), for the self-test."""
    def s(x):
        b = x.encode("utf-8")
        return struct.pack("<Q", len(b)) + b

    out = b"GGUF" + struct.pack("<IQQ", 3, 0, len(kv))
    for k, v in kv.items():
        out += s(k)
        if isinstance(v, str):
            out += struct.pack("<I", 8) + s(v)
        elif isinstance(v, int):
            out += struct.pack("<II", 4, v)
        elif v and isinstance(v[0], str):
            out += struct.pack("<IIQ", 9, 8, len(v)) + b"".join(s(x) for x in v)
        else:
            out += struct.pack("<IIQ", 9, 5, len(v)) + struct.pack(f"<{len(v)}i", *v)
    with open(path, "wb") as f:
        f.write(out)


def self_test():
    """Trains a small BPE tokenizer in-script and checks files against direct encodes."""
    import tempfile
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers, decoders

    sentences = [
        "the quick brown fox jumps over the lazy dog",
        "long context training spreads one sequence over many processes",
        "ring attention passes keys and values around the ring",
        "Ulysses swaps sequence and head sharding with an all-to-all",
        "héllo wörld — unicode survives byte-level BPE",
    ]
    fails = []

    def check(cond, what):
        if not cond:
            fails.append(what)

    with tempfile.TemporaryDirectory() as d:
        tok = Tokenizer(models.BPE(unk_token="<unk>"))
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
        tok.decoder = decoders.ByteLevel()
        tok.train_from_iterator(sentences * 20, trainers.BpeTrainer(
            vocab_size=400, special_tokens=["<unk>", "<s>", "</s>"],
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
        tj = os.path.join(d, "tokenizer.json")
        tok.save(tj)
        eos = tok.token_to_id("</s>")
        vocab = tok.get_vocab_size(with_added_tokens=True)
        jl = os.path.join(d, "docs.jsonl")
        with open(jl, "w", encoding="utf-8") as f:
            for s in sentences:
                f.write(json.dumps({"text": s, "id": 1}) + "\n")
            f.write("\n")
        txt = os.path.join(d, "doc.txt")
        with open(txt, "w", encoding="utf-8") as f:
            f.write(sentences[0] + "\n" + sentences[4])
        out = os.path.join(d, "out.tok")
        check(main(["--tokenizer", d, "--eos", "</s>", "--out", out, jl, txt]) == 0, "jsonl+text run")
        want = []
        for s in sentences + [sentences[0] + "\n" + sentences[4]]:
            want += tok.encode(s, add_special_tokens=False).ids + [eos]
        v, bpt, got, starts = read_token_file(out, with_docs=True)
        check(v == vocab and bpt == 2, f"header vocab {v} bpt {bpt}")
        check(got == want, "tokens equal direct encodes with EOS after each document")
        want_starts, at = [], 0
        for s in sentences + [sentences[0] + "\n" + sentences[4]]:
            want_starts.append(at)
            at += len(tok.encode(s, add_special_tokens=False).ids) + 1
        check(starts == want_starts, f"document index {starts} != {want_starts}")
        check(tok.decode(got[:len(tok.encode(sentences[0]).ids)]) == sentences[0], "decodes")
        check(not [x for x in os.listdir(d) if ".tmp." in x], "no temp file left")
        # 4-byte tokens on request; bytes mode.
        check(main(["--tokenizer", tj, "--bytes-per-token", "4", "--out", out, txt]) == 0, "bpt 4")
        check(read_token_file(out)[1:] == (4, tok.encode(sentences[0] + "\n" + sentences[4]).ids),
              "4-byte file")
        check(main(["--bytes", "--eos-id", "0", "--out", out, txt]) == 0, "bytes run")
        v, bpt, got = read_token_file(out)
        check(v == 256 and got == list((sentences[0] + "\n" + sentences[4]).encode()) + [0], "bytes")
        # Errors: a JSONL line without the field, an unknown EOS token, an empty input.
        bad = os.path.join(d, "bad.jsonl")
        with open(bad, "w") as f:
            f.write('{"text": "ok"}\n{"body": "no text"}\n')
        before = open(out, "rb").read()
        check(main(["--tokenizer", tj, "--out", out, bad]) == 1, "missing field fails")
        check(open(out, "rb").read() == before, "failed run leaves the old file")
        check(main(["--tokenizer", tj, "--eos", "<eos>", "--out", out, txt]) == 1, "unknown eos")
        empty = os.path.join(d, "empty.txt")
        open(empty, "w").close()
        check(main(["--bytes", "--out", out, empty]) == 1, "empty input fails")
        check(not [x for x in os.listdir(d) if ".tmp." in x], "no temp file after failures")
        # The same tokenizer as a GGUF vocabulary (model gpt2, pre "gpt2"): the same tokens.
        spec = json.loads(tok.to_str())
        toks = [None] * vocab
        for t, i in spec["model"]["vocab"].items():
            toks[i] = t
        for a in spec["added_tokens"]:
            toks[a["id"]] = a["content"]
        merges = [m if isinstance(m, str) else " ".join(m) for m in spec["model"]["merges"]]
        types = [3 if t in ("<unk>", "<s>", "</s>") else 1 for t in toks]
        gg = os.path.join(d, "vocab.gguf")
        write_test_gguf(gg, {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2",
                             "tokenizer.ggml.pre": "gpt2", "tokenizer.ggml.tokens": toks,
                             "tokenizer.ggml.merges": merges, "tokenizer.ggml.token_type": types,
                             "tokenizer.ggml.eos_token_id": eos})
        check(main(["--tokenizer", gg, "--eos", "</s>", "--out", out, jl, txt]) == 0, "GGUF tokenizer run")
        v, bpt, got = read_token_file(out)
        check(v == vocab and got == want, "GGUF vocabulary gives the tokenizer.json's tokens")
        write_test_gguf(gg, {"general.architecture": "llama", "tokenizer.ggml.model": "gpt2",
                             "tokenizer.ggml.pre": "no-such-pre", "tokenizer.ggml.tokens": toks})
        check(main(["--tokenizer", gg, "--out", out, txt]) == 1, "unknown pre-tokenizer refused")
    for f in fails:
        print("FAIL", f, file=sys.stderr)
    print(f"prepare_data self-test: {'ok' if not fails else str(len(fails)) + ' failed'}")
    return 1 if fails else 0


if __name__ == "__main__":
    sys.exit(main())
