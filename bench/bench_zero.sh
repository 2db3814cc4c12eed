#!/usr/bin/env bash
# ZeRO stages on 2 ranks: step time, the share of the step blocked in communication (all,
# and model-state communication alone), bytes sent for model states per step (measured and
# by the formulas) and the model-state bytes per rank (params + grads + AdamW + gathered).
# Usage: bench/bench_zero.sh [BUILD_DIR] [SEQ] [MODEL] [STEPS]. Prints a markdown table.
# Layouts: dp 2 (one sequence per rank) and cp 2 (one sequence over both); 1 thread per rank.
set -euo pipefail
BUILD=${1:-build}
SEQ=${2:-4096}
MODEL=${3:-bench-s}
STEPS=${4:-3}
BIN="$BUILD/longctx"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MPI="mpirun --allow-run-as-root --oversubscribe"
echo "model $MODEL, S = $SEQ, 2 ranks x 1 thread, checkpoint selective, the median step of steps 2..$STEPS (the slower of two when STEPS = 3); $(lscpu | sed -n 's/^Model name: *//p')"
echo
echo "| layout | zero | step s | tokens/s | comm wait | of which model states | state MiB sent/step | formula MiB | model states/rank | peak/rank |"
echo "|---|---|---|---|---|---|---|---|---|---|"
for layout in "dp 2|--batch 2" "cp 2|--batch 1 --cp 2"; do
  label=${layout%%|*}; flags=${layout#*|}
  for z in 0 1 2 3; do
    OMP_NUM_THREADS=1 $MPI -np 2 "$BIN" train --model "$MODEL" --seq "$SEQ" --steps "$STEPS" --threads 1 \
      --zero "$z" $flags --log-json "$TMP/log.jsonl" >/dev/null
    python3 - "$TMP/log.jsonl" "$label" "$z" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
r = sorted(rows, key=lambda x: x["step_seconds"])[len(rows) // 2]
mib, gib = 2**20, 2**30
pk = r["peak_bytes_by_category"]
states = pk["params"] + pk["grads"] + pk["optimizer"] + pk["gathered"]
s = r["step_seconds"]
print(f"| {sys.argv[2]} | {sys.argv[3]} | {s:.2f} | {r['tokens_per_s']:.0f} | {100 * r['comm_wait_s'] / s:.1f}% | "
      f"{100 * r['state_wait_s'] / s:.1f}% | {r['grad_bytes_sent'] / mib:.1f} | {r['grad_bytes_formula'] / mib:.1f} | "
      f"{states / mib:.1f} MiB | {r['peak_bytes'] / gib:.2f} GiB |")
PY
  done
done
