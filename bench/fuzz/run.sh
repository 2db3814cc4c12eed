#!/usr/bin/env bash
# Builds the libFuzzer targets (clang -fsanitize=fuzzer,address,undefined) and runs each for
# SECONDS, in parallel. Seeds: a few valid files made here plus tests/data/fuzz/*. Crashing
# inputs land in WORKDIR/crash-*; fix the bug, then copy the input to tests/data/fuzz/
# (st_*.bin / tok_*.bin / gguf_*.bin) so test_fuzz_regress keeps it fixed; a tokenizer crasher
# (fuzz_tok) goes to tests/data/tok/fuzz/, which test_tok reads.
#   usage: bench/fuzz/run.sh [SECONDS=180] [WORKDIR=/tmp/longctx_fuzz]
# Needs clang and libFuzzer (Debian: apt-get install -y clang libfuzzer-14-dev).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
secs=${1:-180}
work=${2:-/tmp/longctx_fuzz}
CC=${CC:-clang}
mkdir -p "$work"
flags=(-g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I"$root/src")
build() { # name, sources...
  local name=$1; shift
  if ! "$CC" "${flags[@]}" -o "$work/$name" "$here/$name.c" "$@" -lcjson -lm 2>"$work/$name.build.log"; then
    cat "$work/$name.build.log" >&2
    echo "run.sh: building $name failed; if -fsanitize=fuzzer does not link, install libFuzzer: apt-get install -y libfuzzer-14-dev" >&2
    exit 1
  fi
}
build fuzz_safetensors "$root/src/io/safetensors.c" "$root/src/io/fsutil.c" "$root/src/core/status.c"
build fuzz_tokfile "$root/src/io/tokfile.c" "$root/src/io/fsutil.c" "$root/src/core/status.c"
build fuzz_gguf "$root/src/io/gguf.c" "$root/src/core/dtype.c" "$root/src/core/status.c"
build fuzz_tok "$root"/src/tok/*.c "$root/src/io/gguf.c" "$root/src/io/fsutil.c" "$root/src/core/dtype.c" \
  "$root/src/core/status.c" "$root/src/core/hash.c"

# Seed corpora: valid files of each kind, and the regression inputs.
mkdir -p "$work/corpus_st" "$work/corpus_tok" "$work/corpus_gguf" "$work/corpus_tokjson"
python3 - "$work" <<'PY'
import json, struct, sys, os
w = sys.argv[1]
def st(name, tensors, meta=None, pad=True):
    hdr, data = {}, b""
    if meta: hdr["__metadata__"] = meta
    for n, (dt, shape, raw) in tensors.items():
        hdr[n] = {"dtype": dt, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    h = json.dumps(hdr, separators=(",", ":")).encode()
    if pad: h += b" " * (-len(h) % 8)
    open(os.path.join(w, "corpus_st", name), "wb").write(struct.pack("<Q", len(h)) + h + data)
st("one_f32", {"w": ("F32", [2, 2], struct.pack("<4f", 1, 2, 3, 4))}, {"format": "pt"})
st("mixed", {"b": ("BF16", [3], b"\x80\x3f\x01\x00\x80\xff"), "h": ("F16", [2], b"\x00\x3c\x00\x7c"),
             "i": ("I64", [1], b"\0" * 8), "s": ("F32", [], struct.pack("<f", 5))})
st("empty", {})
st("zero_size", {"z": ("F32", [0, 3], b""), "y": ("F16", [1], b"\x00\x3c")}, pad=False)
def tok(name, bpt, vocab, toks):
    fmt = "<%d%s" % (len(toks), "H" if bpt == 2 else "I")
    open(os.path.join(w, "corpus_tok", name), "wb").write(
        b"LCTOKENS" + struct.pack("<IIIIQ", 1, bpt, vocab, 0, len(toks)) + struct.pack(fmt, *toks))
tok("u16", 2, 256, [1, 2, 3, 255])
tok("u32", 4, 128256, [0, 70000, 128255])
tok("oov", 2, 65536, [5, 40000, 7])
PY
if [ -d "$root/tests/data/fuzz" ]; then
  cp "$root"/tests/data/fuzz/st_* "$work/corpus_st/" 2>/dev/null || true
  cp "$root"/tests/data/fuzz/tok_* "$work/corpus_tok/" 2>/dev/null || true
  cp "$root"/tests/data/fuzz/gguf_* "$work/corpus_gguf/" 2>/dev/null || true
fi
# The tokenizer loaders (tokenizer.json and a GGUF vocabulary): small tokenizers of each kind
# and the inputs that once broke them (tests/data/tok/fuzz, read by test_tok).
if [ -d "$root/tests/data/tok/fuzz" ]; then
  cp "$root"/tests/data/tok/fuzz/* "$work/corpus_tokjson/" 2>/dev/null || true
fi
cat > "$work/st.dict" <<'D'
"dtype"
"shape"
"data_offsets"
"__metadata__"
"F32"
"BF16"
"F16"
"I64"
"F8_E4M3"
":{"
"[0,"
"]}"
"\x00\x00\x00\x00\x00\x00\x00"
D
cat > "$work/tok.dict" <<'D'
"LCTOKENS"
"\x01\x00\x00\x00"
"\x02\x00\x00\x00"
"\x04\x00\x00\x00"
D

cat > "$work/tokjson.dict" <<'D'
"\"type\""
"\"BPE\""
"\"ByteLevel\""
"\"Sequence\""
"\"Split\""
"\"Digits\""
"\"Metaspace\""
"\"NFC\""
"\"Prepend\""
"\"Replace\""
"\"TemplateProcessing\""
"\"added_tokens\""
"\"merges\""
"\"vocab\""
"\"byte_fallback\":true"
"\"ignore_merges\":true"
"\"lstrip\":true"
"\"rstrip\":true"
"\"single_word\":true"
"\"normalized\":true"
"<0x41>"
"\xc4\xa0"
"\xe2\x96\x81"
"GGUF"
"tokenizer.ggml.model"
"tokenizer.ggml.tokens"
"tokenizer.ggml.merges"
"tokenizer.ggml.token_type"
"tokenizer.ggml.scores"
D

cat > "$work/gguf.dict" <<'D'
"GGUF"
"\x03\x00\x00\x00"
"\x02\x00\x00\x00"
"\x08\x00\x00\x00"
"\x09\x00\x00\x00"
"general.alignment"
"general.architecture"
"\x00\x00\x00\x00\x00\x00\x00"
"\xff\xff\xff\xff\xff\xff\xff\xff"
D

echo "fuzzing each target for ${secs}s in $work"
run() { # target, corpus, dict
  (cd "$work" && ./"$1" -max_total_time="$secs" -max_len=4096 -dict="$3" -print_final_stats=1 \
     -artifact_prefix="$work/crash-$1-" "$2" >"$work/$1.log" 2>&1)
}
rc=0
run fuzz_safetensors "$work/corpus_st" "$work/st.dict" & p1=$!
run fuzz_tokfile "$work/corpus_tok" "$work/tok.dict" & p2=$!
run fuzz_gguf "$work/corpus_gguf" "$work/gguf.dict" & p3=$!
run fuzz_tok "$work/corpus_tokjson" "$work/tokjson.dict" & p4=$!
wait $p1 || rc=1
wait $p2 || rc=1
wait $p3 || rc=1
wait $p4 || rc=1
for t in fuzz_safetensors fuzz_tokfile fuzz_gguf fuzz_tok; do
  echo "== $t"; grep -E "^(stat::|Done|#[0-9]+ +DONE)|ERROR|SUMMARY" "$work/$t.log" | tail -8
done
ls "$work"/crash-* 2>/dev/null && { echo "crashing inputs above"; rc=1; }
exit $rc
