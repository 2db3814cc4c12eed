#!/usr/bin/env bash
# Checkpoints end to end: resume gives the uninterrupted loss curve (bit-identical under
# the same layout, to rounding under another), a crash during a save leaves the previous
# checkpoint loadable, and a checkpoint of another model is refused.
set -u
BIN="$1"
MPI="mpirun --allow-run-as-root --oversubscribe"
export OMP_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
losses() { grep -o '"step":[0-9]*,"loss":[-0-9.e+]*' "$1" | sed 's/"step":\([0-9]*\),"loss":/\1 /'; }
COMMON="--data task:copy --seq 64 --batch 2 --lr 3e-3 --threads 1"

# Uninterrupted reference, and a run saving every 4 steps (same layout: 4 ranks, hp 2 x cp 2).
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --log-json "$TMP/ref.jsonl" >/dev/null 2>&1 && ok || bad "reference run"
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --save "$TMP/ck" --save-every 4 >/dev/null 2>&1 && ok || bad "saving run"
[ -f "$TMP/ck/checkpoint-4/model.safetensors" ] && [ -f "$TMP/ck/checkpoint-4/optimizer.safetensors" ] &&
  [ -f "$TMP/ck/checkpoint-4/trainer_state.json" ] && [ -f "$TMP/ck/checkpoint-4/config.json" ] && ok || bad "checkpoint files"
[ "$(cat "$TMP/ck/latest")" = checkpoint-8 ] && ok || bad "latest is not checkpoint-8"

# Same layout: bit-identical losses for steps 5..8.
$MPI -np 4 "$BIN" train $COMMON --steps 8 --hp 2 --cp 2 --resume "$TMP/ck/checkpoint-4" --log-json "$TMP/same.jsonl" >/dev/null 2>&1 && ok || bad "resume, same layout"
diff <(losses "$TMP/ref.jsonl" | tail -n 4) <(losses "$TMP/same.jsonl") >/dev/null && ok ||
  bad "same-layout resume differs: $(losses "$TMP/same.jsonl" | tr '\n' ' ') vs $(losses "$TMP/ref.jsonl" | tail -n 4 | tr '\n' ' ')"

# Other layouts (2 ranks cp 2; 1 process): equal to rounding (relative 1e-5).
for layout in "2 --cp 2" "1"; do
  np=${layout%% *}; flags=${layout#"$np"}
  $MPI -np "$np" "$BIN" train $COMMON --steps 8 $flags --resume "$TMP/ck/checkpoint-4" --log-json "$TMP/other.jsonl" >/dev/null 2>&1 && ok || bad "resume on $np ranks"
  paste <(losses "$TMP/ref.jsonl" | tail -n 4) <(losses "$TMP/other.jsonl") |
    awk '{d=$2-$4; if (d<0) d=-d; if ($1!=$3 || d > 1e-5*$2) exit 1} END {if (NR!=4) exit 1}' && ok ||
    bad "resume on $np ranks: $(losses "$TMP/other.jsonl" | tr '\n' ' ')"
done

# A crash between writing and publishing a checkpoint keeps the previous one.
"$BIN" train $COMMON --steps 2 --save "$TMP/cr" >/dev/null 2>&1 && ok || bad "first save"
{ LONGCTX_TEST_CRASH=before-rename "$BIN" train $COMMON --steps 4 --resume "$TMP/cr" --save "$TMP/cr" >/dev/null 2>&1; } 2>/dev/null
[ $? -ne 0 ] && ok || bad "the crash hook did not kill the run"
[ "$(cat "$TMP/cr/latest")" = checkpoint-2 ] && [ ! -d "$TMP/cr/checkpoint-4" ] && ok || bad "crash changed latest"
"$BIN" train $COMMON --steps 4 --resume "$TMP/cr" --save "$TMP/cr" >"$TMP/out" 2>&1 && grep -q "resumed from .*checkpoint-2 at step 2" "$TMP/out" && ok ||
  bad "previous checkpoint not loadable after the crash: $(tail -n 2 "$TMP/out")"
[ -z "$(ls -a "$TMP/cr" | grep '\.tmp\.')" ] && ok || bad "stale temporary left after the next save"

# Refusals: another model, another seed, a path that is no checkpoint.
"$BIN" train $COMMON --steps 8 --model demo --resume "$TMP/ck" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "saved for another model" "$TMP/err" && ok || bad "model mismatch: $(cat "$TMP/err")"
"$BIN" train $COMMON --steps 8 --seed 9 --resume "$TMP/ck" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "saved with --seed" "$TMP/err" && ok || bad "seed mismatch: $(cat "$TMP/err")"
"$BIN" train $COMMON --steps 8 --resume "$TMP" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "neither a checkpoint" "$TMP/err" && ok || bad "not a checkpoint: $(cat "$TMP/err")"
"$BIN" train $COMMON --steps 2 --resume "$TMP/ck" >/dev/null 2>"$TMP/err"; [ $? -ne 0 ] && grep -q "beyond --steps" "$TMP/err" && ok || bad "steps: $(cat "$TMP/err")"

echo "cli_checkpoint: $pass passed, $fail failed"
[ $fail -eq 0 ]
