#!/usr/bin/env bash
# The watchdog (issue 13): how long the other ranks take to end after one rank stops
# (SIGSTOP, alive but silent), over TRIALS trials, and what the watchdog costs a normal step.
# Usage: bench/bench_watchdog.sh [BUILD_DIR] [TRIALS] [TIMEOUT]
set -uo pipefail
BUILD=${1:-build}
TRIALS=${2:-20}
TO=${3:-10}
BIN="$BUILD/longctx"
MPI="mpirun --allow-run-as-root --oversubscribe"
export OMP_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'); 4 ranks (hp 2 x cp 2) on $(nproc --all) cores, --timeout $TO"
points=(forward ring reduce)
: >"$TMP/times"
for i in $(seq 1 "$TRIALS"); do
  pt=${points[$((i % 3))]}
  r=$((1 + i % 3))
  # Each stderr line with the time it arrived: from the stop to the job's end.
  LONGCTX_TEST_STOP=$r:3:$pt timeout 120 $MPI -np 4 "$BIN" train --seq 64 --batch 2 --steps 100 --hp 2 --cp 2 \
    --threads 1 --timeout "$TO" 2>&1 >/dev/null | while IFS= read -r line; do echo "$(date +%s.%N) $line"; done >"$TMP/log"
  t_end=$(date +%s.%N)
  t_stop=$(grep -m1 "stops itself" "$TMP/log" | cut -d' ' -f1)
  n=$(grep -c "stopped responding" "$TMP/log")
  echo "$(echo "$t_end - $t_stop" | bc) $n" >>"$TMP/times"
done
python3 - "$TMP/times" "$TO" <<'PY'
import sys
rows = [l.split() for l in open(sys.argv[1])]
t = sorted(float(a) for a, _ in rows)
n = [int(b) for _, b in rows]
print(f"time from the stop to the end of the job over {len(t)} trials (timeout {sys.argv[2]} s): "
      f"min {t[0]:.2f} s, median {t[len(t) // 2]:.2f} s, max {t[-1]:.2f} s; "
      f"ranks reporting the stopped one: min {min(n)}, max {max(n)} of 3")
PY
# Overhead on a normal step: bench-s at S = 2048 on 2 ranks (cp 2), with the watchdog
# (default --timeout 30) and without (--timeout 0), interleaved rounds; median step time.
echo
echo "| round | watchdog | median step s (steps 2-4) |"
echo "|---|---|---|"
for round in 1 2 3; do
  for to in 30 0; do
    $MPI -np 2 "$BIN" train --model bench-s --seq 2048 --cp 2 --batch 1 --steps 4 --threads 1 --timeout $to \
      --log-json "$TMP/w.jsonl" >/dev/null 2>&1
    python3 - "$TMP/w.jsonl" "$round" "$to" <<'PY'
import json, sys
s = sorted(json.loads(l)["step_seconds"] for l in list(open(sys.argv[1]))[1:])
print(f"| {sys.argv[2]} | {'on (--timeout 30)' if sys.argv[3] != '0' else 'off (--timeout 0)'} | {s[len(s) // 2]:.3f} |")
PY
  done
done
