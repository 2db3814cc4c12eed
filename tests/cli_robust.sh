#!/usr/bin/env bash
# Running long jobs: no hang, no lost work, no silent corruption (README: running long jobs).
#  - a rank stopped (SIGSTOP: alive but silent) in forward, in the ring and in the gradient
#    reduction, on two different ranks: every other rank exits with code 3 and the message
#    within the timeout; a rank killed (-9): the job ends; a collective one rank skipped:
#    the stall is reported; a slow but healthy rank is not killed;
#  - SIGTERM to the ranks mid-run: a checkpoint, exit code 75, and the resumed run ends with
#    the same losses and byte-identical files as an uninterrupted run;
#  - a non-finite gradient stops the run naming the step, the last checkpoint being the one
#    before; with --skip-nonfinite the step leaves weights and moments unchanged;
#  - a flipped byte: resume refuses the checkpoint; a save directory falls back to the
#    previous intact checkpoint; a write failing part-way leaves the previous checkpoint;
#  - launcher/world mismatch, an unwritable --save and out-of-range flags are refused
#    before the first step.
# Every run has an outer timeout: a hang fails the test instead of blocking it.
set -u
BIN="$1"
. "$(dirname "$0")/cli_lib.sh"
now() { date +%s.%N; }
COMMON="--data task:copy --seq 64 --batch 2 --threads 1"
T=2 # --timeout of the failure tests, seconds

# 1. Stopped ranks: every other rank reports it and the job has ended within the timeout
# of the stop (start-up ~1 s and 3 steps before it; measured 2.0-3.0 s from the launch
# with T = 2; bound T + 4 s from the launch for an oversubscribed machine).
for pt in forward ring reduce; do
  for r in 1 2; do
    t0=$(now)
    LONGCTX_TEST_STOP=$r:3:$pt timeout 60 $MPI -np 4 "$BIN" train $COMMON --steps 50 --hp 2 --cp 2 --timeout $T \
      >"$TMP/out" 2>"$TMP/err"
    rc=$?
    el=$(echo "$(now) - $t0" | bc)
    # head-first (the default): rank r sits at cp r / 2, hp r % 2
    n=$(grep -c "error (rank [0-9]): rank $r (dp 0, cp $((r / 2)), hp $((r % 2)) of the layout dp 1 x cp 2 x hp 2) stopped responding: no heartbeat for [0-9.]* s (--timeout $T) during step 3" "$TMP/err")
    [ $rc -eq 3 ] && [ "$n" -eq 3 ] && [ "$(echo "$el < $T + 4" | bc)" = 1 ] && ok ||
      bad "rank $r stopped in $pt: rc $rc after $el s, $n messages: $(grep longctx "$TMP/err" | head -3)"
    echo "stopped rank $r in $pt: job ended after $el s (rc $rc), $n ranks reported it"
  done
done
# Killed: the launcher ends the job at once.
t0=$(now)
LONGCTX_TEST_KILL=1:3:ring timeout 60 $MPI -np 4 "$BIN" train $COMMON --steps 50 --hp 2 --cp 2 --timeout $T >/dev/null 2>&1
rc=$?
el=$(echo "$(now) - $t0" | bc)
[ $rc -ne 0 ] && [ $rc -ne 124 ] && [ "$(echo "$el < 20" | bc)" = 1 ] && ok || bad "killed rank: rc $rc after $el s"
# A collective that one rank skipped: every rank waits, the stall is named.
LONGCTX_TEST_SKIP_SUM=1:3 timeout 60 $MPI -np 4 "$BIN" train $COMMON --steps 50 --hp 2 --cp 2 --timeout $T \
  >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 3 ] && grep -q "stalled in step 3: this rank has waited" "$TMP/err" && ok || bad "stall: rc $rc $(head -3 "$TMP/err")"
# A slow but healthy rank (6 s of compute, timeout 2 s) is not killed.
LONGCTX_TEST_SLEEP=1:3:forward:6 timeout 60 $MPI -np 4 "$BIN" train $COMMON --steps 5 --hp 2 --cp 2 --timeout 2 \
  >"$TMP/out" 2>"$TMP/err" && grep -q "done: 5 steps" "$TMP/out" && ok || bad "slow rank killed: $(tail -2 "$TMP/err")"

# 2. SIGTERM (as Slurm sends it: to every task) mid-run.
N=400
REF="--data task:copy --seq 64 --batch 2 --threads 1 --steps $N --cp 2"
timeout 120 $MPI -np 2 "$BIN" train $REF --save "$TMP/ref" --log-json "$TMP/ref.jsonl" >/dev/null 2>&1 && ok || bad "reference run"
( timeout 120 $MPI -np 2 "$BIN" train $REF --save "$TMP/pre" --log-json "$TMP/pre.jsonl" >"$TMP/pre.out" 2>&1
  echo $? >"$TMP/pre.rc" ) &
for i in $(seq 1 300); do n=$(grep -c '"loss"' "$TMP/pre.jsonl" 2>/dev/null); [ "${n:-0}" -ge 20 ] && break; sleep 0.05; done
pkill -TERM -f "^[^ ]*longctx train.*$TMP/pre"
wait
rc=$(cat "$TMP/pre.rc")
stop=$(sed -n 's/^stopped by a signal after step \([0-9]*\).*/\1/p' "$TMP/pre.out")
[ "$rc" = 75 ] && [ -n "$stop" ] && [ "$stop" -lt $N ] && [ -f "$TMP/pre/checkpoint-$stop/checksums.json" ] && ok ||
  bad "SIGTERM: rc $rc, stopped at '$stop': $(tail -3 "$TMP/pre.out")"
echo "SIGTERM: stopped after step $stop with exit code $rc"
timeout 120 $MPI -np 2 "$BIN" train $REF --save "$TMP/pre" --resume "$TMP/pre" --log-json "$TMP/post.jsonl" >/dev/null 2>&1 && ok ||
  bad "resume after SIGTERM"
diff <(losses "$TMP/ref.jsonl" | awk -v s="$stop" '$1 > s') <(losses "$TMP/post.jsonl") >/dev/null && ok ||
  bad "resumed losses differ from the uninterrupted run"
for f in model.safetensors optimizer.safetensors; do
  cmp -s "$TMP/ref/checkpoint-$N/$f" "$TMP/pre/checkpoint-$N/$f" && ok || bad "resumed $f differs from the uninterrupted run's"
done

# 3. Non-finite gradient at step 3: the run stops naming it; the latest checkpoint is 2.
LONGCTX_TEST_NAN_STEP=3 timeout 60 $MPI -np 2 "$BIN" train $COMMON --steps 5 --cp 2 --save "$TMP/nan" --save-every 1 \
  --keep 10 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && grep -q "step 3: the gradient is not finite" "$TMP/err" && [ "$(cat "$TMP/nan/latest")" = checkpoint-2 ] &&
  [ ! -d "$TMP/nan/checkpoint-3" ] && ok || bad "non-finite stop: rc $rc $(head -2 "$TMP/err") latest $(cat "$TMP/nan/latest")"
LONGCTX_TEST_NAN_STEP=3 timeout 60 $MPI -np 2 "$BIN" train $COMMON --steps 5 --cp 2 --save "$TMP/skip" --save-every 1 \
  --keep 10 --skip-nonfinite 1 >"$TMP/out" 2>"$TMP/err" && grep -q "step 3: loss or gradient not finite: update skipped" "$TMP/out" &&
  grep -q "done: 5 steps" "$TMP/out" && ok || bad "skip-nonfinite run: $(tail -2 "$TMP/err")"
for f in model.safetensors optimizer.safetensors; do
  cmp -s "$TMP/skip/checkpoint-2/$f" "$TMP/skip/checkpoint-3/$f" && ok || bad "the skipped step changed $f"
  ! cmp -s "$TMP/skip/checkpoint-3/$f" "$TMP/skip/checkpoint-4/$f" && ok || bad "step 4 did not update $f"
done

# 4. A flipped byte: refused; a save directory falls back to the previous intact checkpoint.
"$BIN" train $COMMON --steps 4 --save "$TMP/flip" --save-every 2 >/dev/null 2>&1 && ok || bad "run to flip"
python3 - "$TMP/flip/checkpoint-4/model.safetensors" <<'PY'
import sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read()); b[len(b) // 2] ^= 0x10; open(p, "wb").write(bytes(b))
PY
"$BIN" train $COMMON --steps 6 --resume "$TMP/flip/checkpoint-4" >/dev/null 2>"$TMP/err"
[ $? -eq 2 ] && grep -q "checkpoint-4 is damaged: model.safetensors does not match its checksum" "$TMP/err" && ok ||
  bad "damaged checkpoint accepted: $(cat "$TMP/err")"
"$BIN" train $COMMON --steps 6 --resume "$TMP/flip" >"$TMP/out" 2>&1 &&
  grep -q "resuming from .*checkpoint-2, the newest intact checkpoint" "$TMP/out" && grep -q "resumed from .*checkpoint-2 at step 2" "$TMP/out" &&
  ok || bad "fallback to checkpoint-2: $(head -3 "$TMP/out")"

# 5. A write that fails part-way (the third checkpoint): the run ends with the error, and
# the previous checkpoint is intact and resumes.
size=$(du -cb "$TMP/flip/checkpoint-2"/* | tail -1 | cut -f1)
LONGCTX_TEST_WRITE_LIMIT=$((size * 5 / 2)) "$BIN" train $COMMON --steps 4 --save "$TMP/full" --save-every 1 >/dev/null 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && grep -q "No space left on device" "$TMP/err" && [ "$(cat "$TMP/full/latest")" = checkpoint-2 ] && ok ||
  bad "failed write: rc $rc $(cat "$TMP/err") latest $(cat "$TMP/full/latest" 2>/dev/null)"
[ -z "$(ls -a "$TMP/full" | grep '\.tmp\.')" ] || [ -z "$(ls -a "$TMP/full"/.checkpoint-3* 2>/dev/null)" ] && ok || bad "temporary left"
"$BIN" train $COMMON --steps 4 --resume "$TMP/full" >"$TMP/out" 2>&1 && grep -q "resumed from .*checkpoint-2 at step 2" "$TMP/out" &&
  ok || bad "resume after the failed write: $(tail -2 "$TMP/out")"

# 6. Refused before the first step.
expect_early() { # want args...
  local want="$1"; shift
  "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  [ $rc -eq 2 ] && grep -q -- "$want" "$TMP/err" && ! grep -q '^step ' "$TMP/out" && ok ||
    bad "'$*': rc $rc, $(cat "$TMP/err") (wanted '$want', no step)"
}
touch "$TMP/afile"
expect_early "cannot be created" "$BIN" train $COMMON --steps 3 --save "$TMP/afile/sub"
expect_early "--threads 0" "$BIN" train --seq 64 --threads 0
expect_early "--timeout -1" "$BIN" train $COMMON --timeout -1
expect_early "--timeout 0.5" "$BIN" train $COMMON --timeout 0.5
expect_early "--skip-nonfinite -1" "$BIN" train $COMMON --skip-nonfinite -1
expect_early "different MPI implementations, or srun lacks --mpi=pmix" env SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=4 "$BIN" train $COMMON
# Threads per rank from Slurm's allocation.
SLURM_CPUS_PER_TASK=1 "$BIN" train $COMMON --steps 1 >"$TMP/out" 2>&1 && grep -q ", 1 threads/rank," "$TMP/out" && ok ||
  bad "SLURM_CPUS_PER_TASK: $(grep layout "$TMP/out")"

finish cli_robust
