#!/usr/bin/env bash
# Head-chunked Ulysses (--head-chunk) on 2 ranks (hp 2), bench-s: step time and the
# attention-side arena peak (comm + checkpoints, rank 0's --log-json) per chunk size against
# plan's prediction. Configurations run interleaved, each in its own job, each only after the
# machine's 1-minute load is below QUIET (default 0.6; our previous job's load decays first).
# usage: bench/head_chunk.sh [BIN] ; env: SEQ (16384), STEPS (2), REPS (2), CHUNKS ("all 2")
set -u
BIN=${1:-build-hc/longctx}
SEQ=${SEQ:-16384} STEPS=${STEPS:-2} REPS=${REPS:-2} CHUNKS=${CHUNKS:-"all 2"} QUIET=${QUIET:-0.6}
OUT=$(mktemp -d)
MPI="mpirun --allow-run-as-root --oversubscribe -np 2"
ARGS="--model bench-s --seq $SEQ --hp 2 --threads 1"
quiet() { while awk -v q="$QUIET" '{exit !($1 > q)}' /proc/loadavg; do sleep 10; done; }
for r in $(seq 1 "$REPS"); do
  for hc in $CHUNKS; do
    quiet
    OMP_NUM_THREADS=1 $MPI "$BIN" train $ARGS --steps $STEPS --warmup 0 --head-chunk "$hc" --log-json "$OUT/$hc.$r.jsonl" >"$OUT/$hc.$r.out" 2>&1 ||
      { echo "run $hc rep $r failed:"; tail -5 "$OUT/$hc.$r.out"; exit 1; }
    # Our 2 ranks make the 1-minute load ~2 by the end of a run; more means other work ran.
    cut -d' ' -f1 /proc/loadavg >"$OUT/$hc.$r.load"
    echo "done $hc rep $r: $(tail -1 "$OUT/$hc.$r.jsonl" | grep -o '"step_seconds":[0-9.]*'), load $(cat "$OUT/$hc.$r.load")" >&2
  done
done
echo "| --head-chunk | step s (each run, last step) | 1-min load at the end | comm peak | checkpoint peak | comm + checkpoints | plan: comm + checkpoints | loss after $STEPS steps |"
echo "|---|---|---|---|---|---|---|---|"
for hc in $CHUNKS; do
  "$BIN" plan $ARGS --head-chunk "$hc" >"$OUT/plan.$hc" 2>&1
  python3 - "$OUT" "$hc" "$REPS" <<'PY'
import json, re, sys
out, hc, reps = sys.argv[1], sys.argv[2], int(sys.argv[3])
rows = [[json.loads(l) for l in open(f"{out}/{hc}.{r}.jsonl")] for r in range(1, reps + 1)]
last = [r[-1] for r in rows]
pk = last[0]["peak_bytes_by_category"]
comm, ck = pk["comm"], pk["checkpoints"]
plan = open(f"{out}/plan.{hc}").read()
def cat(name):
    m = re.search(r"^\| %s \| ([0-9.]+) (KiB|MiB|GiB|B) \|" % name, plan, re.M)
    return float(m.group(1)) * {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}[m.group(2)]
mib = lambda b: "%.1f MiB" % (b / 2**20)
loads = " / ".join(open(f"{out}/{hc}.{r}.load").read().strip() for r in range(1, reps + 1))
print("| %s | %s | %s | %s | %s | %s | %s | %.6f |" % (hc, " / ".join("%.1f" % l["step_seconds"] for l in last), loads, mib(comm), mib(ck),
      mib(comm + ck), mib(cat("comm") + cat("checkpoints")), last[0]["loss"]))
PY
done
rm -rf "$OUT"
