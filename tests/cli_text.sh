#!/usr/bin/env bash
# Text in, text out through the program: `longctx prepare` writes byte for byte the token
# files tools/prepare_data.py wrote with the Python `tokenizers` package (committed, for
# each kind of tokenizer; text, JSONL and gzip'd JSONL, EOS, special tokens); `longctx eval`
# scores a text or token file in windows (loss, perplexity, bits per byte; the same number
# from the text and from its token file; every token after the first scored once);
# `generate --prompt TEXT` / `--chat` speak text with a real model when its GGUF is in the
# cache (tools/real_model.sh fetches it); and the errors of each.
set -u
BIN="$1"
SRC="$2"
. "$(dirname "$0")/cli_lib.sh"
D="$SRC/tests/data"
TXT=/usr/share/common-licenses/Apache-2.0
head -c 3000 "$TXT" >"$TMP/a.txt"
# A byte model (vocab 256): the text's bytes are its tokens; bits per byte = loss / ln 2.
"$BIN" eval --model "$D/golden_qwen3" --data "$TMP/a.txt" --seq 128 --stride 64 --threads 1 --log-json "$TMP/e.json" >"$TMP/out" 2>&1 &&
  ok || bad "eval text: $(cat "$TMP/out")"
python3 - "$TMP/e.json" <<'PY' && ok || bad "eval JSON: $(cat "$TMP/e.json")"
import json, math, sys
e = json.load(open(sys.argv[1]))
assert e["tokens"] == 2999 and e["bytes"] == 2999 and e["windows"] == 46, e
assert abs(e["bits_per_byte"] - e["loss"] / math.log(2)) < 1e-9 and abs(e["perplexity"] - math.exp(e["loss"])) < 1e-9 * e["perplexity"], e
assert 0 < e["loss"] < 10, e
PY
# The same bytes as a token file: the same loss to the last digit.
python3 - "$TMP/a.txt" "$TMP/a.tok" <<'PY'
import struct, sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b"LCTOKENS" + struct.pack("<IIIIQ", 1, 2, 256, 0, len(b)) + struct.pack("<%dH" % len(b), *b))
PY
"$BIN" eval --model "$D/golden_qwen3" --data "$TMP/a.tok" --seq 128 --stride 64 --threads 1 --log-json "$TMP/t.json" >/dev/null 2>&1 &&
  ok || bad "eval token file"
[ "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['loss'])" "$TMP/e.json")" = \
  "$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['loss'])" "$TMP/t.json")" ] && ok || bad "text and token file disagree"
expect_error "--stride 65: give 1 <= stride <= --seq 64" eval --model "$D/golden_qwen3" --data "$TMP/a.txt" --seq 64 --stride 65
expect_error "eval needs --model" eval --data "$TMP/a.txt" --seq 64
expect_error "--seq 1: give the tokens per window" eval --model "$D/golden_qwen3" --data "$TMP/a.txt" --seq 1
expect_error "cannot open $TMP/nope" eval --model "$D/golden_qwen3" --data "$TMP/nope" --seq 64
expect_error "--seq 5000 exceeds the model's context of 4096 positions" eval --model "$D/golden_linear" --data "$TMP/a.txt" --seq 5000
# prepare = prepare_data.py (tests/data/tok/*/prepared*.tok were written by it:
#   prepare_data.py --tokenizer T --eos-id 1 --out prepared.tok corpus.txt corpus.jsonl
#   prepare_data.py --tokenizer T --add-special-tokens --out prepared_special.tok corpus.jsonl.gz)
TD="$D/tok"
for k in gpt2 llama3 qwen2 llama2 mistral flags; do
  "$BIN" prepare --model "$TD/$k/tokenizer.json" --eos-id 1 --out "$TMP/$k.tok" "$TD/corpus.txt" "$TD/corpus.jsonl" >"$TMP/out" 2>&1 &&
    cmp -s "$TMP/$k.tok" "$TD/$k/prepared.tok" && ok || bad "prepare $k differs from prepare_data.py: $(cat "$TMP/out")"
done
for k in llama2 llama3; do
  "$BIN" prepare --model "$TD/$k/tokenizer.json" --add-special-tokens --out "$TMP/${k}s.tok" "$TD/corpus.jsonl.gz" >/dev/null 2>&1 &&
    cmp -s "$TMP/${k}s.tok" "$TD/$k/prepared_special.tok" && ok || bad "prepare $k --add-special-tokens (gz) differs"
done
"$BIN" prepare --bytes --eos-id 0 --out "$TMP/b.tok" "$TMP/a.txt" >/dev/null && python3 - "$TMP/b.tok" "$TMP/a.txt" <<'PY' && ok || bad "prepare --bytes"
import struct, sys
d = open(sys.argv[1], "rb").read(); t = open(sys.argv[2], "rb").read()
magic, ver, bpt, vocab, flags, n = struct.unpack_from("<8sIIIIQ", d)
assert (magic, ver, bpt, vocab, flags, n) == (b"LCTOKENS", 2, 2, 256, 1, len(t) + 1), (ver, bpt, vocab, flags, n)
assert list(struct.unpack_from("<%dH" % n, d, 32)) == list(t) + [0]
PY
"$BIN" prepare --bytes --eos-id=0 --out="$TMP/eq.tok" "$TMP/a.txt" >/dev/null 2>&1 && cmp -s "$TMP/eq.tok" "$TMP/b.tok" && ok || bad "prepare --flag=value"
printf '{"text": "a"}\n{"text": 5}\n' >"$TMP/bad1.jsonl"
printf '{"text": "a"}\n{"body": "b"}\n' >"$TMP/bad2.jsonl"
printf '{"text": "a"} x\n' >"$TMP/bad3.jsonl"
: >"$TMP/empty.txt"
expect_error "bad1.jsonl:2: field \"text\" is not a string" prepare --bytes --out "$TMP/x.tok" "$TMP/bad1.jsonl"
expect_error "bad2.jsonl:2: no field \"text\"; choose the text field with --field" prepare --bytes --out "$TMP/x.tok" "$TMP/bad2.jsonl"
expect_error "bad3.jsonl:1: not valid JSON" prepare --bytes --out "$TMP/x.tok" "$TMP/bad3.jsonl"
expect_error "the input holds no tokens" prepare --bytes --out "$TMP/x.tok" "$TMP/empty.txt"
expect_error "cannot read it" prepare --bytes --out "$TMP/x.tok" "$TMP/none.txt"
expect_error "--eos '<nope>' is not a token of this tokenizer" prepare --model "$TD/gpt2/tokenizer.json" --eos "<nope>" --out "$TMP/x.tok" "$TMP/a.txt"
expect_error "give --model" prepare --out "$TMP/x.tok" "$TMP/a.txt"
expect_error "give --out FILE and at least one input" prepare --bytes "$TMP/a.txt"
[ ! -e "$TMP/x.tok" ] && ok || bad "a failed prepare left $TMP/x.tok"
# --prompt or --prompt-ids; a tokenizer bigger than the model: refused.
expect_error "or --prompt-ids IDS, one of them" generate --model "$D/golden_qwen2" --prompt "x" --max-new 1 --prompt-ids 1
mkdir -p "$TMP/m" && cp "$D/golden_qwen2/config.json" "$D/golden_qwen2/model.safetensors" "$TD/gpt2/tokenizer.json" "$TMP/m/"
expect_error "outside the model's vocabulary of 256: the tokenizer is not this model's" generate --model "$TMP/m" --prompt "hello world, hello" --max-new 1
"$BIN" generate --model "$D/golden_qwen2" --prompt-ids "1,2,3" --max-new 2 >"$TMP/out" 2>&1 && grep -q '^\\x01\\x02\\x03' "$TMP/out" && ok || bad "--prompt-ids: $(cat "$TMP/out")"
expect_error "--chat needs --prompt TEXT" generate --model "$D/golden_qwen2" --prompt-ids 1 --chat
# The real model, when its GGUF is in the cache.
G="${XDG_CACHE_HOME:-$HOME/.cache}/longctx/SmolLM2-135M-Instruct.Q4_1.gguf"
if [ -f "$G" ]; then
  "$BIN" generate --model "$G" --prompt "The capital of France is" --max-new 3 --threads 2 >"$TMP/out" 2>&1 &&
    grep -q "^The capital of France is Paris" "$TMP/out" && ok || bad "SmolLM2 text generation: $(cat "$TMP/out")"
  "$BIN" generate --model "$G" --chat --prompt "What is the capital of France?" --max-new 12 --threads 2 >"$TMP/out" 2>"$TMP/err" &&
    grep -q "Paris" "$TMP/out" && grep -q "stopped at the end-of-text token" "$TMP/err" && ok || bad "SmolLM2 chat: $(cat "$TMP/out" "$TMP/err")"
  "$BIN" prepare --model "$G" --eos "<|endoftext|>" --out "$TMP/s.tok" "$TXT" >/dev/null 2>&1 && ok || bad "prepare with SmolLM2's GGUF vocabulary"
  "$BIN" eval --model "$G" --data "$TMP/s.tok" --seq 256 --max-tokens 1025 --threads 2 --log-json "$TMP/s.json" >/dev/null 2>&1 &&
    python3 -c "import json,sys; e=json.load(open(sys.argv[1])); assert 1.5 < e['loss'] < 4.5, e" "$TMP/s.json" && ok || bad "SmolLM2 eval on English: $(cat "$TMP/s.json" 2>/dev/null)"
  # The text itself through the model's tokenizer: the same tokens (SmolLM2 adds no BOS), the
  # same loss, and bits per byte from the decoded text.
  "$BIN" eval --model "$G" --data "$TXT" --seq 256 --max-tokens 1025 --threads 2 --log-json "$TMP/t.json" >"$TMP/out" 2>&1 &&
    python3 -c "import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); assert a['loss'] == b['loss'] and 0.5 < a['bits_per_byte'] < 1.5, (a, b)" "$TMP/t.json" "$TMP/s.json" &&
    ok || bad "SmolLM2 eval on the text: $(cat "$TMP/out")"
else
  echo "skip: the SmolLM2 checks need $G (tools/real_model.sh fetches it)"
fi
finish cli_text
