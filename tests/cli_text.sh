#!/usr/bin/env bash
# Text in, text out through the program: `longctx eval` scores a text or token file in
# windows (loss, perplexity, bits per byte; the same number from the text and from its
# token file; every token after the first scored once), and its errors.
set -u
BIN="$1"
SRC="$2"
. "$(dirname "$0")/cli_lib.sh"
D="$SRC/tests/data"
expect_error() { # expected-substring args...
  local w="$1"; shift
  "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ $rc -ne 0 ] && grep -q -- "$w" "$TMP/err" && [ "$(wc -l <"$TMP/err")" -le 2 ]; then ok
  else bad "'$*': rc=$rc, stderr: $(cat "$TMP/err") (wanted '$w')"; fi
}
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
finish cli_text
