#!/usr/bin/env bash
# Distributed layouts: time split between compute and communication wait, and the
# bytes each rank sends per layer against the formulas (Ulysses: 4 all-to-alls forward
# + 4 backward; ring: cp-1 k/v hops forward, k/v + dk/dv hops backward).
# Usage: [PRECISION=bf16] bench/bench_dist.sh [BUILD_DIR] [SEQ] [MODEL]. Prints a markdown table.
# 2 ranks use the 2 cores; 4 and 8 ranks are oversubscribed (noted in the table).
set -euo pipefail
BUILD=${1:-build}
SEQ=${2:-4096}
MODEL=${3:-demo}
BIN="$BUILD/longctx"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MPI="mpirun --allow-run-as-root --oversubscribe"
NL=$("$BIN" train --model "$MODEL" --steps 0 --seq 64 2>/dev/null | sed -n 's/.*layers \([0-9]*\),.*/\1/p')
PREC=${PRECISION:-fp32}
echo "model $MODEL ($NL layers), S = $SEQ, batch 1 per data-parallel group, checkpoint selective, precision $PREC, 1 thread per rank, median of steps 2-3"
echo
echo "| ranks | layout | step s | tokens/s | attn kernels s | comm wait s | wait % | attn MiB/layer sent | formula MiB/layer | grad all-reduce MiB |"
echo "|---|---|---|---|---|---|---|---|---|---|"
run() { # np label flags...
  local np=$1 label=$2; shift 2
  local batch=$((np / $(echo "$@" | awk '{hp=1;cp=1;for(i=1;i<=NF;i++){if($i=="--hp")hp=$(i+1);if($i=="--cp")cp=$(i+1)}print hp*cp}')))
  OMP_NUM_THREADS=1 $MPI -np "$np" "$BIN" train --model "$MODEL" --seq "$SEQ" --batch "$batch" --steps 3 \
    --threads 1 --precision "$PREC" --log-json "$TMP/log.jsonl" "$@" >/dev/null
  python3 - "$TMP/log.jsonl" "$np" "$label" "$NL" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])][1:]
np_, label, nl = int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
r = sorted(rows, key=lambda x: x["step_seconds"])[len(rows) // 2]
mib = 1024 * 1024
over = " (oversubscribed)" if np_ > 2 else ""
print(f"| {np_}{over} | {label} | {r['step_seconds']:.2f} | {r['tokens_per_s']:.0f} | {r['attn_kernel_s']:.2f} | "
      f"{r['comm_wait_s']:.2f} | {100 * r['comm_wait_s'] / r['step_seconds']:.0f}% | "
      f"{r['attn_bytes_sent'] / nl / mib:.2f} | {r['attn_bytes_formula'] / nl / mib:.2f} | {r['grad_bytes_sent'] / mib:.1f} |")
PY
}
run 1 "single process" --hp 1 --cp 1
run 2 "hp 2 (Ulysses)" --hp 2
run 2 "cp 2 (ring)" --cp 2
run 2 "dp 2" --hp 1 --cp 1
run 4 "hp 2 x cp 2, head-first" --hp 2 --cp 2
run 4 "hp 2 x cp 2, context-first" --hp 2 --cp 2 --placement context-first
run 4 "cp 4" --cp 4
run 4 "cp 4, ring window 2" --cp 4 --ring-window 2
run 8 "hp 2 x cp 4" --hp 2 --cp 4
run 8 "cp 8, ring window 4" --cp 8 --ring-window 4
