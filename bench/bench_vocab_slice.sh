#!/usr/bin/env bash
# Vocabulary slices (--vocab-slice) on 2 ranks under ZeRO 3: the same training step of
# bench-s (vocabulary 32000 x 512: the embedding and the untied head are 5.8x a layer each)
# with the whole matrices and in slices, interleaved; step time, the arena's gathered, grads
# and total peaks per rank (rank 0's --log-json) next to `longctx plan`'s prediction.
#
#   bench/bench_vocab_slice.sh [SEQ] [SLICE] [REPEATS]    (default 4096 4000 2)
#
# Environment: LONGCTX (build/longctx), PREC (bf16), CKPT (selective), THREADS (1 per rank).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LONGCTX=${LONGCTX:-$ROOT/build/longctx}
SEQ=${1:-4096}
SLICE=${2:-4000}
REPEATS=${3:-2}
PREC=${PREC:-bf16}
CKPT=${CKPT:-selective}
VOCAB=32000
THREADS=${THREADS:-1}
MPI="mpirun --allow-run-as-root --oversubscribe"
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT

python3 - "$WORK/tok" "$SEQ" "$VOCAB" <<'PY'
import random, struct, sys
n, V = 4 * int(sys.argv[2]) + 1, int(sys.argv[3])
r = random.Random(3)
toks = [r.randrange(V) for _ in range(n)]
fmt = "<%dI" % n if V > 65535 else "<%dH" % n
w = 4 if V > 65535 else 2
open(sys.argv[1], "wb").write(b"LCTOKENS" + struct.pack("<IIIIQ", 1, w, V, 0, n) + struct.pack(fmt, *toks))
PY

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) CPUs"
COMMON=(--model bench-s --data "$WORK/tok" --seq "$SEQ" --cp 2 --zero 3 --precision "$PREC" --checkpoint "$CKPT"
        --steps 2 --warmup 0 --lr 1e-5 --threads "$THREADS")
echo "longctx $(git -C "$ROOT" log -1 --format='%h %cd' --date=short): $MPI -np 2 longctx train ${COMMON[*]} [--vocab-slice $SLICE]"
echo
echo "| run | vocabulary | last step s | gathered peak (plan) | grads peak (plan) | total peak (plan) |"
echo "|---|---|---|---|---|---|"
for ((i = 1; i <= REPEATS; i++)); do
  for vs in 0 "$SLICE"; do
    J="$WORK/r$i-$vs.jsonl"
    $MPI -np 2 "$LONGCTX" train "${COMMON[@]}" --vocab-slice "$vs" --log-json "$J" >"$WORK/out" 2>&1 || { grep -i error "$WORK/out" | head -3; exit 1; }
    "$LONGCTX" plan --model bench-s --seq "$SEQ" --cp 2 --zero 3 --precision "$PREC" --checkpoint "$CKPT" \
      --threads "$THREADS" --vocab-slice "$vs" >"$WORK/plan"
    python3 - "$J" "$WORK/plan" "$i" "$vs" <<'PY'
import json, re, sys
r = [json.loads(l) for l in open(sys.argv[1]) if '"step_seconds"' in l][-1]
plan = {}
for l in open(sys.argv[2]):
    m = re.match(r"\| (gathered|grads|total peak) \| ([0-9.]+ [KMG]i?B) \|", l)
    if m:
        plan[m.group(1)] = m.group(2)
mib = 2**20
c = r["peak_bytes_by_category"]
print(f"| {sys.argv[3]} | {'whole' if sys.argv[4] == '0' else 'slices of ' + sys.argv[4]} | {r['step_seconds']:.2f} | "
      f"{c['gathered'] / mib:.1f} MiB ({plan.get('gathered')}) | {c['grads'] / mib:.1f} MiB ({plan.get('grads')}) | "
      f"{r['peak_bytes'] / mib:.1f} MiB ({plan.get('total peak')}) |")
PY
  done
done
