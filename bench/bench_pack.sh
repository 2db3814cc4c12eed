#!/usr/bin/env bash
# Packed documents at long S (issue 12): attention work per context rank (zigzag vs balanced),
# the skipped-block fraction, and training throughput packed vs the same tokens as one causal
# sequence, on 2 ranks (cp 2) and 4 ranks (cp 4, oversubscribed on 2 cores).
# Usage: bench/bench_pack.sh [BUILD_DIR] [SEQ] [MODEL]
set -euo pipefail
BUILD=${1:-build}
SEQ=${2:-65536}
MODEL=${3:-demo}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MPI="mpirun --allow-run-as-root --oversubscribe"
python3 "$(dirname "$0")/make_doc_mix.py" "$TMP/mix.tok" 4000000
echo "CPU: $(lscpu | sed -n 's/^Model name: *//p')"
[ "${SKIP_ANALYSIS:-0}" = 1 ] || OMP_NUM_THREADS=1 "$BUILD/bench_pack" "$TMP/mix.tok" "$SEQ" 8
echo
echo "| ranks | data | layout | step s | tokens/s | attention pairs / S(S+1)/2 | cp work max/mean | attn kernels s (rank 0) |"
echo "|---|---|---|---|---|---|---|---|"
for cp in 2 4; do
  for run in "packed|--pack" "one causal sequence|--cp-layout zigzag"; do
    label=${run%%|*}; flags=${run#*|}
    OMP_NUM_THREADS=1 $MPI -np "$cp" "$BUILD/longctx" train --model "$MODEL" --data "$TMP/mix.tok" --seq "$SEQ" \
      --cp "$cp" --batch 1 --steps 2 --threads 1 $flags --log-json "$TMP/log.jsonl" >/dev/null
    python3 - "$TMP/log.jsonl" "$cp" "$label" "$SEQ" "$flags" <<'PY'
import json, sys
r = [json.loads(l) for l in open(sys.argv[1])][-1]
S = int(sys.argv[4]); lay = "balanced" if "pack" in sys.argv[5] else "zigzag"
print(f"| {sys.argv[2]} | {sys.argv[3]} | {lay} | {r['step_seconds']:.1f} | {r['tokens_per_s']:.0f} | "
      f"{r['attn_pairs'] / (S * (S + 1) / 2):.3f} | {r['cp_work_imbalance']:.3f} | {r['attn_kernel_s']:.1f} |")
PY
  done
done
