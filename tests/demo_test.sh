#!/usr/bin/env bash
# The README's demo end to end (tools/demo.sh, ~2.5 minutes): on 2 MPI ranks the demo
# preset must reach >= 90% held-out task:passkey accuracy (records at least S/2 tokens
# before the answer), the world must really be 2 ranks, and the trained model must answer
# one fixed fresh sample (PROMPT_SEED 11) right: the run ends at 100% held-out accuracy, so
# a miss means decoding differs from training. Usage: demo_test.sh BUILD_DIR MPIEXEC
set -u
BUILD="$1"
MPIEXEC="$2"
SRC="$(cd "$(dirname "$0")/.." && pwd)"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }

MPIRUN="$MPIEXEC --allow-run-as-root --oversubscribe" PROMPT_SEED=11 \
  bash "$SRC/tools/demo.sh" "$BUILD" "$TMP/out" >"$TMP/log" 2>&1 && ok || bad "demo exited non-zero: $(tail -c 2000 "$TMP/log")"
grep -a -q '2 processes = dp 1 x cp 2 x hp 1' "$TMP/log" && ok || bad "the demo did not run as one 2-rank job: $(head -c 1500 "$TMP/log")"
acc=$(grep -a -o 'eval *600 | held-out loss [0-9.]* | accuracy [0-9.]*%' "$TMP/log" | sed 's/.*accuracy \([0-9.]*\)%/\1/')
[ -n "$acc" ] && awk -v a="$acc" 'BEGIN { exit !(a >= 90) }' && ok || bad "final held-out accuracy '$acc' < 90%"
grep -a -q '^# expected ...: the answer is RIGHT$' "$TMP/log" && ok || bad "the trained model did not answer the fresh sample (PROMPT_SEED 11) right: $(tail -c 800 "$TMP/log")"
[ "$(grep -a -c '^step ' "$TMP/log")" = 12 ] && ok || bad "progress every 50 of 600 steps: $(grep -a -c '^step ' "$TMP/log") lines"
! grep -a -q $'\033' "$TMP/log" && ok || bad "terminal escapes in a redirected mpirun log"
[ -f "$TMP/out/ckpt/checkpoint-600/model.safetensors" ] && ok || bad "no final checkpoint"
echo "demo: final held-out accuracy $acc%; $(grep -a -o 'done: [0-9]* steps in [0-9.]* s' "$TMP/log")"
echo "demo_test: $pass passed, $fail failed"
[ "$fail" = 0 ]
