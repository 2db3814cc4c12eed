#!/usr/bin/env bash
# --calibrate-from-run's accuracy (issue 36): each configuration runs 5 steps with
# `--calibrate-from-run 2` on its own copy of a calibrated machine file; the prediction of
# steps 3-5 (made with the rates corrected by step 2) against their measured times.
#   bench/calib_from_run.sh MACHINE.json OUT_DIR      (LC: the binary, default build/longctx)
set -uo pipefail
M=${1:?usage: bench/calib_from_run.sh MACHINE.json OUT_DIR}
OUT=${2:?usage: bench/calib_from_run.sh MACHINE.json OUT_DIR}
LC=${LC:-build/longctx}
MPI="mpirun --allow-run-as-root --oversubscribe"
mkdir -p "$OUT"
run() { # name ranks args...
  local name=$1 np=$2
  shift 2
  cp "$M" "$OUT/$name.machine.json"
  if [ "$np" = 1 ]; then
    env OMP_NUM_THREADS=2 "$LC" train "$@" --threads 2 --steps 5 --calibrate-from-run 2 --machine "$OUT/$name.machine.json" \
      --log-json "$OUT/$name.jsonl" >"$OUT/$name.out" 2>&1
  else
    env OMP_NUM_THREADS=1 $MPI -np "$np" "$LC" train "$@" --threads 1 --steps 5 --calibrate-from-run 2 \
      --machine "$OUT/$name.machine.json" --log-json "$OUT/$name.jsonl" >"$OUT/$name.out" 2>&1
  fi
}
run bs-2k-1p-sel 1 --model bench-s --data task:copy --seq 2048 --checkpoint selective
run bs-4k-1p-full 1 --model bench-s --data task:copy --seq 4096 --checkpoint full
run demo-8k-1p-sel 1 --model demo --data task:copy --seq 8192 --checkpoint selective
run bs-4k-cp2 2 --model bench-s --data task:copy --seq 4096 --cp 2
run bs-2k-cp2-z3 2 --model bench-s --data task:copy --seq 2048 --cp 2 --zero 3
run demo-4k-dp2-z2 2 --model demo --data task:copy --seq 4096 --batch 2 --zero 2
python3 - "$OUT" <<'PY'
import json, glob, os, statistics, sys
rows = []
for f in sorted(glob.glob(os.path.join(sys.argv[1], "*.jsonl"))):
    r = [json.loads(l) for l in open(f) if '"step_seconds"' in l]
    if len(r) < 5:
        print(os.path.basename(f), "incomplete"); continue
    before = (r[1]["predicted_step_s"] - r[1]["step_seconds"]) / r[1]["step_seconds"] if "predicted_step_s" in r[1] else float("nan")
    after = [(x["predicted_step_s"] - x["step_seconds"]) / x["step_seconds"] for x in r[2:]]
    rows.append((os.path.basename(f)[:-6], before, statistics.median(after)))
print("| configuration | step 2 error (calibrate's rates) | steps 3-5 error (corrected), median |")
print("|---|---|---|")
for n, b, a in rows:
    print(f"| {n} | {100*b:+.1f}% | {100*a:+.1f}% |")
print(f"median absolute error of steps 3-5: {100*statistics.median(abs(a) for _, _, a in rows):.1f}%")
PY
