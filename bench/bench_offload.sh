#!/usr/bin/env bash
# Layer checkpoints in RAM vs offloaded to disk (--offload-checkpoints): the same training
# step of bench-s on one process, interleaved (RAM, disk, RAM, disk, ...), with the step
# time, the arena's checkpoint and total peaks and the process's peak RSS; and the disk's
# sequential write and read bandwidth (dd, 1 GiB, direct I/O where the filesystem allows).
#
#   bench/bench_offload.sh [SEQ] [REPEATS]     (default 32768 2; prints a markdown table)
#
# Environment: LONGCTX (build/longctx), DIR (the offload directory: /var/tmp/longctx-offload),
# PREC (bf16), CKPT (selective), THREADS (2), STEPS (2: the first warms up; the last is timed).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
LONGCTX=${LONGCTX:-$ROOT/build/longctx}
SEQ=${1:-32768}
REPEATS=${2:-2}
DIR=${DIR:-/var/tmp/longctx-offload}
PREC=${PREC:-bf16}
CKPT=${CKPT:-selective}
THREADS=${THREADS:-2}
STEPS=${STEPS:-2}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$DIR"

# Random tokens of the bench-s vocabulary (32000), enough for the steps.
python3 - "$WORK/tok" "$SEQ" "$STEPS" <<'PY'
import random, struct, sys
n = int(sys.argv[2]) * (int(sys.argv[3]) + 1) + 1
r = random.Random(7)
toks = [r.randrange(32000) for _ in range(n)]
open(sys.argv[1], "wb").write(b"LCTOKENS" + struct.pack("<IIIIQ", 1, 2, 32000, 0, n) + struct.pack("<%dH" % n, *toks))
PY

# Disk bandwidth where the checkpoints go.
DD="$DIR/dd.$$"
wbw=$( (dd if=/dev/zero of="$DD" bs=16M count=64 oflag=direct conv=fsync 2>&1 || dd if=/dev/zero of="$DD" bs=16M count=64 conv=fsync 2>&1) | awk '/copied/ {print $(NF-1), $NF}')
rbw=$( (dd if="$DD" of=/dev/null bs=16M iflag=direct 2>&1 || dd if="$DD" of=/dev/null bs=16M 2>&1) | awk '/copied/ {print $(NF-1), $NF}')
rm -f "$DD"

echo "CPU: $(lscpu | sed -n 's/^Model name: *//p'), family $(lscpu | sed -n 's/^CPU family: *//p') model $(lscpu | sed -n 's/^Model: *//p'), $(nproc) CPUs"
echo "disk ($DIR, $(df -h --output=source,fstype "$DIR" | tail -1 | tr -s ' ')): write $wbw, read $rbw (dd 1 GiB, direct I/O)"
echo "longctx $(git -C "$ROOT" log -1 --format='%h %cd' --date=short): train --model bench-s --seq $SEQ --steps $STEPS --precision $PREC --checkpoint $CKPT --threads $THREADS [--offload-checkpoints $DIR]"
echo
echo "| run | checkpoints | last step s | tokens/s | checkpoint peak | arena peak | peak RSS |"
echo "|---|---|---|---|---|---|---|"
for ((i = 1; i <= REPEATS; i++)); do
  for where in ram disk; do
    J="$WORK/$where$i.jsonl"
    extra=()
    [ "$where" = disk ] && extra=(--offload-checkpoints "$DIR")
    /usr/bin/time -f "%M" -o "$WORK/rss" "$LONGCTX" train --model bench-s --data "$WORK/tok" --seq "$SEQ" \
      --steps "$STEPS" --warmup 0 --lr 1e-5 --threads "$THREADS" --precision "$PREC" --checkpoint "$CKPT" \
      --log-json "$J" "${extra[@]}" >"$WORK/out" 2>&1 || { tail -3 "$WORK/out"; exit 1; }
    python3 - "$J" "$(cat "$WORK/rss")" "$i" "$where" "$SEQ" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if '"step_seconds"' in l]
r = recs[-1]
gib = 2**30
print(f"| {sys.argv[3]} | {'RAM' if sys.argv[4] == 'ram' else 'disk'} | {r['step_seconds']:.1f} | "
      f"{int(sys.argv[5]) / r['step_seconds']:.0f} | {r['peak_bytes_by_category']['checkpoints'] / gib:.2f} GiB | "
      f"{r['peak_bytes'] / gib:.2f} GiB | {int(sys.argv[2]) * 1024 / gib:.2f} GiB |")
PY
  done
done
