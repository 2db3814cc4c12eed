#!/usr/bin/env bash
# Round trip through transformers, by hand (needs torch + transformers; CI has neither):
# each family's golden model (tests/data/golden_*: Llama, Mistral, RoPE scalings, Qwen2,
# Qwen3) is loaded by longctx, trained 2 steps and saved as an HF directory; transformers
# loads the saved directory (AutoModelForCausalLM: no missing, unexpected or misshapen
# weight) and its loss on ids[t] = (31t + 7) % V, t < 37, is compared with longctx's loss of
# the same weights on the same 37 tokens (--lr 0, --seq 36: the same 36 predictions).
# golden_dynamic is left out: transformers runs all 37 positions (the last predicts
# nothing) and dynamic NTK depends on that length, longctx runs 36.
#   BIN=build/longctx PY=/tmp/gvenv/bin/python tools/check_roundtrip.sh
set -u
BIN=${BIN:-build/longctx}
PY=${PY:-/tmp/gvenv/bin/python}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail=0
python3 - "$T/ids.tok" <<'PY'
import struct, sys
ids = [(31 * t + 7) % 256 for t in range(37)]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<8sIIIIQ", b"LCTOKENS", 2, 2, 256, 0, len(ids)))
    f.write(struct.pack("<%dH" % len(ids), *ids))
PY
printf "%-20s %-20s %-20s %s\n" model longctx transformers "rel diff"
for m in golden_untied golden_tied golden_mistral golden_llama3 golden_linear golden_yarn golden_longrope \
         golden_qwen2 golden_qwen2_tied golden_qwen3 golden_qwen3_bias; do
  "$BIN" train --model tests/data/$m --data task:copy --seq 32 --steps 2 --threads 1 --save "$T/$m" >/dev/null 2>"$T/err" ||
    { echo "$m: training failed: $(cat "$T/err")"; fail=1; continue; }
  "$BIN" train --model "$T/$m/checkpoint-2" --data "$T/ids.tok" --seq 36 --steps 1 --lr 0 --threads 1 \
    --log-json "$T/l.jsonl" >/dev/null 2>"$T/err" || { echo "$m: evaluation failed: $(cat "$T/err")"; fail=1; continue; }
  ours=$(grep -o '"loss":[-0-9.e+]*' "$T/l.jsonl" | head -1 | cut -d: -f2)
  theirs=$("$PY" tools/make_golden.py --check-load "$T/$m/checkpoint-2" 2>&1 | awk '/^loss /{print $2} /FAIL/{print "FAIL"}')
  rel=$(python3 -c "import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); print('%.2e' % (abs(a - b) / abs(b)))" "$ours" "$theirs" 2>/dev/null || echo "-")
  printf "%-20s %-20s %-20s %s\n" "$m" "$ours" "$theirs" "$rel"
  # fp32 in both, different summation orders: 1e-5 relative.
  python3 -c "import sys; sys.exit(0 if abs(float(sys.argv[1]) - float(sys.argv[2])) <= 1e-5 * abs(float(sys.argv[2])) else 1)" "$ours" "$theirs" 2>/dev/null || fail=1
done
[ $fail -eq 0 ] && echo "ROUND TRIP PASSED" || echo "ROUND TRIP FAILED"
exit $fail
