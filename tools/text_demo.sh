#!/usr/bin/env bash
# Real text, no downloads: the Python standard library's top-level modules (every
# python3 installation ships them; one document per file, ~170 files, ~4.7 MB) become a
# byte-level token file with a document index (tools/prepare_data.py --bytes, a NUL byte
# ending each document), and the demo model trains on it with whole documents packed into
# each sequence, spread over 2 ranks (ring attention, balanced layout).
# Usage: tools/text_demo.sh [BUILD_DIR] [OUT_DIR] [STEPS]   (MPIRUN overrides the launcher)
set -euo pipefail
BUILD=${1:-build}
OUT=${2:-text-out}
STEPS=${3:-200}
MPIRUN=${MPIRUN:-mpirun --allow-run-as-root --oversubscribe}
mkdir -p "$OUT"
STDLIB=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["stdlib"])')
python3 "$(dirname "$0")/prepare_data.py" --bytes --eos-id 0 --out "$OUT/stdlib.tok" "$STDLIB"/*.py
OMP_NUM_THREADS=1 $MPIRUN -np 2 "$BUILD/longctx" train --model demo --data "$OUT/stdlib.tok" --pack \
  --seq 1024 --cp 2 --batch 8 --steps "$STEPS" --lr 2e-3 --warmup 20 --threads 1 --log-every 25 \
  --log-json "$OUT/train.jsonl" --save "$OUT/ckpt"
