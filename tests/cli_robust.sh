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
#  - --skip-nonfinite N counts non-finite steps in a row: N pass, N + 1 stop;
#  - every file of a checkpoint damaged in turn: resume refuses it; a save directory falls
#    back to the newest intact checkpoint; a write failing part-way leaves the previous one;
#  - launcher/world mismatch, an unwritable --save (the exact line) and out-of-range flags
#    are refused before the first step; threads per rank default to the node's cores over
#    its ranks, and forcing more says so in one warning line.
# Every run has an outer timeout: a hang fails the test instead of blocking it.
set -u
BIN="$1"
. "$(dirname "$0")/cli_lib.sh"
now() { date +%s.%N; }
COMMON="--data task:copy --seq 64 --batch 2 --threads 1"
T=2 # --timeout of the failure tests, seconds

# 1. Stopped ranks: every other rank reports it and exits within the timeout of the stop
# (start-up ~1 s and 3 steps before it; bound T + 4 s from the launch for an
# oversubscribed machine). Measured from the fault (the hook prints its wall-clock time,
# and each reporting rank the time of its own exit): the silence each report states is
# within the watchdog's budget, T - 4 periods of silence plus one period for the check
# (T = 2: period 0.2 s, at most 1.4 s; reported 1.2 s; a watchdog that waited the whole T
# would say >= 2.0), and every reporting rank has exited (two periods after its report)
# within T of the fault, in every run: by the arithmetic at most 1.2 + 0.2 + 0.4 = 1.8 s,
# measured 1.5-1.8 s, idle or with both cores busy (4 ranks and mpirun on 2
# cores); bound T + 0.3 s for the scheduler (a report that waited 2 s before exiting:
# 3.4 s). The job as mpirun sees it ends later: mpirun then ends the
# stopped rank (SIGCONT and SIGTERM, then SIGKILL), which the watchdog does not time
# (measured 1.6-3.6 s on 2 busy cores); bound T + 3 s there, only to show no hang.
PERIOD=0.2
for pt in forward ring reduce; do
  for r in 1 2; do
    t0=$(now)
    LONGCTX_TEST_STOP=$r:3:$pt timeout 60 $MPI -np 4 "$BIN" train $COMMON --steps 50 --hp 2 --cp 2 --timeout $T \
      >"$TMP/out" 2>"$TMP/err"
    rc=$?
    t1=$(now)
    el=$(echo "$t1 - $t0" | bc)
    # head-first (the default): rank r sits at cp r / 2, hp r % 2
    about="error (rank [0-9]): rank $r (dp 0, cp $((r / 2)), hp $((r % 2)) of the layout dp 1 x cp 2 x hp 2) stopped responding: no heartbeat for [0-9.]* s (--timeout $T) during step 3"
    n=$(grep -c "$about" "$TMP/err")
    [ $rc -eq 3 ] && [ "$n" -eq 3 ] && [ "$(echo "$el < $T + 4" | bc)" = 1 ] && ok ||
      bad "rank $r stopped in $pt: rc $rc after $el s, $n messages: $(grep longctx "$TMP/err" | head -3)"
    fault=$(sed -n "s/.*test hook: rank $r stops itself at $pt of step 3 (wall clock \([0-9.]*\) s).*/\1/p" "$TMP/err")
    silence=$(grep "$about" "$TMP/err" | sed 's/.*no heartbeat for \([0-9.]*\) s.*/\1/' | sort -n | tail -1)
    # the reporting ranks' exits (the stopped rank, once mpirun resumes it to end it, may say its own)
    exits=$(grep "test hook: rank [0-9] exits" "$TMP/err" | grep -vc "rank $r exits")
    last=$(grep -v "rank $r exits" "$TMP/err" | sed -n 's/.*test hook: rank [0-9] exits (wall clock \([0-9.]*\) s).*/\1/p' | sort -n | tail -1)
    exited=$(echo "${last:-0} - ${fault:-0}" | bc)
    ended=$(echo "$t1 - ${fault:-0}" | bc)
    [ -n "$fault" ] && [ -n "$silence" ] && [ "$(echo "$silence <= $T - 3 * $PERIOD + 0.05" | bc)" = 1 ] &&
      [ "$exits" -ge 1 ] && [ "$(echo "$exited <= $T + 0.3" | bc)" = 1 ] && [ "$(echo "$ended <= $T + 3" | bc)" = 1 ] && ok ||
      bad "rank $r stopped in $pt: reported 'no heartbeat for ${silence:-?} s' (budget $T - 3 x $PERIOD), the last of $exits reporting ranks exited ${exited} s after the fault (bound $T + 0.3), the job ended ${ended} s after it (bound $T + 3)"
    echo "stopped rank $r in $pt: job ended $el s after the launch, $ended s after the fault (rc $rc); $n ranks reported $silence s of silence; the last of $exits exited $exited s after the fault"
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
# "In a row" is the policy: with --skip-nonfinite 2, non-finite steps 2, 4 5, 7 8 9 skip 2
# (1 in a row), 4 5 (1, 2), 7 8 (1, 2), and step 9, the third in a row, stops the run: a
# finite step between two resets the count (counting all would stop at 5), and N in a row
# pass while N + 1 stop (an off-by-one stops at 5 or 8, or never).
LONGCTX_TEST_NAN_STEP=2,4,5,7,8,9 timeout 60 "$BIN" train $COMMON --steps 12 --skip-nonfinite 2 >"$TMP/out" 2>"$TMP/err"
rc=$?
skipped=$(sed -n 's/^step \([0-9]*\): loss or gradient not finite: update skipped (\([0-9]*\) in a row.*/\1:\2/p' "$TMP/out" | tr '\n' ' ')
[ $rc -eq 1 ] && [ "$skipped" = "2:1 4:1 5:2 7:1 8:2 " ] &&
  grep -q "step 9: the gradient is not finite .* in too many steps in a row" "$TMP/err" && ! grep -q "^done" "$TMP/out" && ok ||
  bad "--skip-nonfinite 2 over non-finite steps 2,4,5,7,8,9: rc $rc, skipped '$skipped' (want '2:1 4:1 5:2 7:1 8:2 '), $(head -2 "$TMP/err")"

# 4. Damaged checkpoints. Checkpoints 1-4 (--keep 4); every file of checkpoint-4 damaged
# in turn (a flipped byte; checksums.json cut in half, as an interrupted write leaves it):
# resuming it directly is refused naming the damage, and the save directory falls back to
# checkpoint-3, the newest intact one (a verification that skips a file resumes step 4).
"$BIN" train $COMMON --steps 4 --save "$TMP/flip" --save-every 1 --keep 4 >/dev/null 2>&1 && ok || bad "run to damage"
damage() { # FILE: flips the middle byte, or cuts checksums.json in half
python3 - "$1" <<'PY'
import os, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
if p.endswith("checksums.json"): b = b[:len(b) // 2]
else: b[len(b) // 2] ^= 0x10
open(p, "wb").write(bytes(b))
PY
}
for f in model.safetensors optimizer.safetensors trainer_state.json config.json checksums.json; do
  rm -rf "$TMP/dmg" && cp -r "$TMP/flip" "$TMP/dmg" && damage "$TMP/dmg/checkpoint-4/$f"
  case $f in
    checksums.json) want="checkpoint-4/checksums.json is damaged (not the JSON longctx writes)" ;;
    *) want="checkpoint-4 is damaged: $f does not match its checksum" ;;
  esac
  "$BIN" train $COMMON --steps 6 --resume "$TMP/dmg/checkpoint-4" >/dev/null 2>"$TMP/err"
  rc=$?
  [ $rc -eq 2 ] && grep -qF "$want" "$TMP/err" && ok || bad "damaged $f accepted: rc $rc, $(cat "$TMP/err") (wanted '$want')"
  "$BIN" train $COMMON --steps 6 --resume "$TMP/dmg" >"$TMP/out" 2>&1 &&
    grep -qF "$want" "$TMP/out" && grep -q "resuming from .*dmg/checkpoint-3, the newest intact checkpoint" "$TMP/out" &&
    grep -q "resumed from .*dmg/checkpoint-3 at step 3" "$TMP/out" && ok ||
    bad "damaged $f: no fallback to checkpoint-3: $(grep -v '^step\|^ ' "$TMP/out" | head -3)"
done
# The newest intact: with 4 and 3 damaged, step 2 (not 1, the oldest intact one).
rm -rf "$TMP/dmg" && cp -r "$TMP/flip" "$TMP/dmg" && damage "$TMP/dmg/checkpoint-4/model.safetensors" &&
  damage "$TMP/dmg/checkpoint-3/optimizer.safetensors"
"$BIN" train $COMMON --steps 6 --resume "$TMP/dmg" >"$TMP/out" 2>&1 && grep -q "resumed from .*dmg/checkpoint-2 at step 2" "$TMP/out" &&
  ok || bad "checkpoints 4 and 3 damaged: $(grep resum "$TMP/out" | head -2)"
rm -rf "$TMP/dmg"

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
expect_early "cannot create directory $TMP/afile: a file of that name" "$BIN" train $COMMON --steps 3 --save "$TMP/afile/sub"
# The whole line, once (it was formatted into itself: the message nested in the message).
"$BIN" train $COMMON --steps 3 --save /proc/x >/dev/null 2>"$TMP/err"
[ "$(cat "$TMP/err")" = "longctx: error: --save /proc/x: cannot create directory /proc/x (No such file or directory): check the path and its permissions" ] &&
  ok || bad "--save /proc/x: $(cat "$TMP/err")"
expect_early "--threads 0" "$BIN" train --seq 64 --threads 0
expect_early "--timeout -1" "$BIN" train $COMMON --timeout -1
expect_early "--timeout 0.5" "$BIN" train $COMMON --timeout 0.5
expect_early "--skip-nonfinite -1" "$BIN" train $COMMON --skip-nonfinite -1
expect_early "different MPI implementations, or srun lacks --mpi=pmix" env SLURM_PROCID=0 SLURM_STEP_NUM_TASKS=4 "$BIN" train $COMMON
# Threads per rank from Slurm's allocation.
SLURM_CPUS_PER_TASK=1 "$BIN" train $COMMON --steps 1 >"$TMP/out" 2>&1 && grep -q ", 1 threads/rank," "$TMP/out" && ok ||
  bad "SLURM_CPUS_PER_TASK: $(grep layout "$TMP/out")"
# Without --threads or OMP_NUM_THREADS: the node's cores over its ranks (LONGCTX_TEST_CORES
# stands for the cores): 8 cores, 2 ranks of mpirun (OMPI_COMM_WORLD_LOCAL_SIZE): 4 each;
# 4 tasks per node of an srun step: 2 each; one process: every core it may use. The
# default never oversubscribes, so no warning.
C0="--data task:copy --seq 64 --batch 2" # COMMON without --threads
NOOMP="env -u OMP_NUM_THREADS"
threads_of() { sed -n 's/.*, \([0-9]*\) threads\/rank,.*/\1/p' "$1" | head -1; }
LONGCTX_TEST_CORES=8 timeout 60 $NOOMP $MPI -np 2 "$BIN" train $C0 --cp 2 --steps 1 >"$TMP/out" 2>"$TMP/err"
[ "$(threads_of "$TMP/out")" = 4 ] && ! grep -q warning "$TMP/err" && ok ||
  bad "default threads, 2 ranks on 8 cores: $(threads_of "$TMP/out") (want 4) $(cat "$TMP/err")"
LONGCTX_TEST_CORES=8 SLURM_PROCID=0 SLURM_NTASKS_PER_NODE=4 $NOOMP "$BIN" train $C0 --steps 1 >"$TMP/out" 2>"$TMP/err"
[ "$(threads_of "$TMP/out")" = 2 ] && ok || bad "default threads, srun 4 tasks per node on 8 cores: $(threads_of "$TMP/out") (want 2)"
$NOOMP "$BIN" train $C0 --steps 1 >"$TMP/out" 2>"$TMP/err"
[ "$(threads_of "$TMP/out")" = "$($NOOMP nproc)" ] && ! grep -q warning "$TMP/err" && ok ||
  bad "default threads, one process: $(threads_of "$TMP/out") (want nproc = $($NOOMP nproc))"
# Forced beyond the cores: one warning line with the fix (rank 0 only); the run goes on.
LONGCTX_TEST_CORES=2 timeout 60 $NOOMP $MPI -np 2 "$BIN" train $C0 --cp 2 --steps 1 --threads 2 >"$TMP/out" 2>"$TMP/err"
rc=$?
w="longctx: warning: 2 ranks on this node x 2 threads per rank (--threads) = 4 threads on 2 cores: oversubscribed, every step runs many times slower; use --threads 1, or leave --threads out"
[ $rc -eq 0 ] && [ "$(grep -c warning "$TMP/err")" = 1 ] && [ "$(grep warning "$TMP/err")" = "$w" ] && ok ||
  bad "--threads 2 x 2 ranks on 2 cores: rc $rc, $(cat "$TMP/err")"
LONGCTX_TEST_CORES=1 OMP_NUM_THREADS=2 "$BIN" train $C0 --steps 1 >"$TMP/out" 2>"$TMP/err"
[ "$(cat "$TMP/err")" = "longctx: warning: 2 threads (OMP_NUM_THREADS) on 1 core: oversubscribed, every step runs many times slower; use --threads 1, or unset OMP_NUM_THREADS" ] &&
  ok || bad "OMP_NUM_THREADS 2 on 1 core: $(cat "$TMP/err")"

finish cli_robust
