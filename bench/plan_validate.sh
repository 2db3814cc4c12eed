#!/usr/bin/env bash
# Validates longctx's time model (DESIGN.md, Planning) on this machine against measured runs.
#
# What it measures: `longctx calibrate` profiles this machine twice into $OUT/machine.json
# (1 process, and 2 ranks x 1 thread under mpirun: one profile per (ranks, threads) pair).
# Then 20 training configurations run, each `--steps 3 --machine $OUT/machine.json
# --log-json ...`: 1 process x 2 threads; 2 ranks x 1 thread as dp 2 (batch 2), cp 2 and
# hp 2; ZeRO 0-3; --checkpoint none/full/selective; --precision fp32/bf16; --pack
# (task:copy's generated documents); S = 2K to 32K; models bench-s and demo. Step 1 is a
# warm-up: "measured" is the median step_seconds of steps 2-3 and "predicted" the median
# predicted_step_s of the same lines. Then `longctx plan --auto` picks a layout for
# bench-s at S = 16K on 2 ranks; the pick is run too (unless it is one of the measured
# 16K layouts) and compared, per sequence, with the best measured 16K candidate.
# Output: $OUT/rows.tsv (name, command, predicted, measured, error%), and a summary on
# stdout (every row, median and worst absolute relative error, Kendall tau-b between
# predicted and measured over all pairs, the plan --auto check). Raw logs: $OUT/runs/.
#
# How long: about 15-20 minutes on 2 quiet Zen 4 cores (the two bench-s 16K bf16 runs are
# ~5 minutes of it, calibrate 1-2); add ~5 minutes when plan --auto picks a 16K layout that
# was not measured (e.g. dp 2 at batch 2). Other work on the cores inflates the measured
# times: set QUIET to wait for a quiet machine before each run.
#
# Builds nothing: expects $LC. Usage: bench/plan_validate.sh
# Environment:
#   OUT (/tmp/plan_validate)  output directory
#   LC (build/longctx)        the binary
#   ONLY (empty = all)        bash regex on configuration names: run only those
#                             (names below; "auto-" is the plan --auto check)
#   CALIBRATE (1)             0 = reuse an existing $OUT/machine.json
#   REUSE (0)                 1 = keep a configuration's earlier log when it has 3 steps
#   QUIET (empty)             e.g. 0.6: before each run wait (at most 10 min) until the
#                             1-minute load average is below it
#   P16 (bf16)                precision of the bench-s 16K runs and of plan --auto
#   MEM_PER_RANK (10)         GiB per rank given to plan --auto
#   AUTO (1)                  0 = skip the plan --auto check
set -uo pipefail

OUT=${OUT:-/tmp/plan_validate}
LC=${LC:-build/longctx}
ONLY=${ONLY:-}
CALIBRATE=${CALIBRATE:-1}
REUSE=${REUSE:-0}
QUIET=${QUIET:-}
P16=${P16:-bf16}
MEM_PER_RANK=${MEM_PER_RANK:-10}
AUTO=${AUTO:-1}
MPI="mpirun --allow-run-as-root --oversubscribe"
MACHINE=$OUT/machine.json
RUNS=$OUT/runs
T0=$(date +%s)

[ -x "$LC" ] || { echo "plan_validate: $LC not found or not executable (build first, or set LC)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "plan_validate: python3 is needed for the summary" >&2; exit 1; }
mkdir -p "$OUT" "$RUNS"
: >"$OUT/runs.tsv"   # name, ranks, command, exit code, 1-minute load at the end, seconds

log() { echo "[plan_validate $(date +%H:%M:%S) +$(($(date +%s) - T0))s] $*" >&2; }

quiet() {
  [ -n "$QUIET" ] || return 0
  local waited=0
  while awk -v q="$QUIET" '{exit !($1 > q)}' /proc/loadavg && [ "$waited" -lt 600 ]; do
    sleep 10; waited=$((waited + 10))
  done
}

# ---- calibrate: one profile per (ranks, threads) pair, both in the same file ----
if [ "$CALIBRATE" = 1 ]; then
  rm -f "$MACHINE"
  log "calibrate, 1 process x 2 threads"
  quiet
  OMP_NUM_THREADS=2 "$LC" calibrate --out "$MACHINE" >"$OUT/calibrate_1x2.out" 2>&1 ||
    { echo "calibrate (1 process) failed:"; tail -5 "$OUT/calibrate_1x2.out"; exit 1; }
  log "calibrate, 2 ranks x 1 thread"
  quiet
  OMP_NUM_THREADS=1 $MPI -np 2 "$LC" calibrate --out "$MACHINE" >"$OUT/calibrate_2x1.out" 2>&1 ||
    { echo "calibrate (2 ranks) failed:"; tail -5 "$OUT/calibrate_2x1.out"; exit 1; }
fi
[ -s "$MACHINE" ] || { echo "plan_validate: no $MACHINE (run with CALIBRATE=1)" >&2; exit 1; }

# ---- one configuration: name, ranks, then train flags (steps, machine, log, threads added) ----
run_cfg() {
  local name=$1 np=$2; shift 2
  if [ -n "$ONLY" ] && ! [[ $name =~ $ONLY ]]; then return 0; fi
  local jl=$RUNS/$name.jsonl out=$RUNS/$name.out
  local -a cmd
  if [ "$np" = 1 ]; then
    cmd=(env OMP_NUM_THREADS=2 "$LC" train "$@" --threads 2 --steps 3 --machine "$MACHINE" --log-json "$jl")
  else
    cmd=(env OMP_NUM_THREADS=1 $MPI -np "$np" "$LC" train "$@" --threads 1 --steps 3 --machine "$MACHINE" --log-json "$jl")
  fi
  if [ "$REUSE" = 1 ] && [ -s "$jl" ] && [ "$(wc -l <"$jl")" -ge 3 ]; then
    log "$name: reusing $jl"
    printf '%s\t%s\t%s\t0\treused\t0\n' "$name" "$np" "${cmd[*]}" >>"$OUT/runs.tsv"
    return 0
  fi
  rm -f "$jl"
  quiet
  log "$name: ${cmd[*]}"
  local t=$(date +%s) rc
  "${cmd[@]}" >"$out" 2>&1
  rc=$?
  local load=$(cut -d' ' -f1 /proc/loadavg) secs=$(($(date +%s) - t))
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$np" "${cmd[*]}" "$rc" "$load" "$secs" >>"$OUT/runs.tsv"
  if [ "$rc" != 0 ]; then
    log "$name FAILED (exit $rc), last lines of $out:"; tail -3 "$out" >&2
  else
    log "$name done in ${secs}s, 1-minute load $load"
  fi
}

BS="--model bench-s --data task:copy"
DEMO="--model demo --data task:copy"

# 1 process x 2 threads
run_cfg bs-2k-1p-fp32-sel       1 $BS --seq 2048 --batch 1
run_cfg bs-4k-1p-fp32-sel       1 $BS --seq 4096 --batch 1
run_cfg bs-4k-1p-fp32-full      1 $BS --seq 4096 --batch 1 --checkpoint full
run_cfg bs-4k-1p-fp32-none      1 $BS --seq 4096 --batch 1 --checkpoint none
run_cfg bs-4k-1p-bf16-sel       1 $BS --seq 4096 --batch 1 --precision bf16
run_cfg demo-8k-1p-fp32-sel     1 $DEMO --seq 8192 --batch 1
# 2 ranks x 1 thread: the three layouts of 2 ranks
run_cfg bs-4k-dp2-fp32          2 $BS --seq 4096 --batch 2 --hp 1 --cp 1
run_cfg bs-4k-cp2-fp32          2 $BS --seq 4096 --batch 1 --cp 2
run_cfg bs-4k-hp2-fp32          2 $BS --seq 4096 --batch 1 --hp 2
run_cfg bs-4k-hp2-bf16          2 $BS --seq 4096 --batch 1 --hp 2 --precision bf16
# ZeRO 1-3 (ZeRO 0 is every other row); at 2K the per-step state traffic weighs most
run_cfg bs-2k-cp2-z1            2 $BS --seq 2048 --batch 1 --cp 2 --zero 1
run_cfg bs-2k-cp2-z2            2 $BS --seq 2048 --batch 1 --cp 2 --zero 2
run_cfg bs-2k-cp2-z3            2 $BS --seq 2048 --batch 1 --cp 2 --zero 3
run_cfg demo-4k-dp2-z2          2 $DEMO --seq 4096 --batch 2 --hp 1 --cp 1 --zero 2
# packed documents
run_cfg bs-8k-cp2-pack-fp32     2 $BS --seq 8192 --batch 1 --cp 2 --pack
run_cfg demo-32k-cp2-pack-fp32  2 $DEMO --seq 32768 --batch 1 --cp 2 --pack
run_cfg demo-32k-hp2-pack-bf16-z3 2 $DEMO --seq 32768 --batch 1 --hp 2 --pack --precision bf16 --zero 3
# long S
run_cfg demo-16k-hp2-bf16       2 $DEMO --seq 16384 --batch 1 --hp 2 --precision bf16
# bench-s at 16K on 2 ranks: the candidates plan --auto chooses among (at most two of these:
# ~45-60 s per step each)
run_cfg bs-16k-cp2-$P16         2 $BS --seq 16384 --batch 1 --cp 2 --precision "$P16"
run_cfg bs-16k-hp2-$P16         2 $BS --seq 16384 --batch 1 --hp 2 --precision "$P16"
# plan --auto's runner-up kind on this machine: the ring without checkpoints under ZeRO 3
run_cfg bs-16k-cp2-none-z3-$P16 2 $BS --seq 16384 --batch 1 --cp 2 --checkpoint none --zero 3 --precision "$P16"

# ---- plan --auto for bench-s at 16K on 2 ranks; run its pick unless already measured ----
: >"$OUT/auto.tsv"
if [ "$AUTO" = 1 ] && { [ -z "$ONLY" ] || [[ auto-bs-16k-pick =~ $ONLY ]]; }; then
  log "plan --auto --model bench-s --seq 16384 --gpus 2"
  "$LC" plan --auto --model bench-s --seq 16384 --gpus 2 --threads 1 --gpus-per-node 2 --mem-per-rank "$MEM_PER_RANK" \
    --precision "$P16" --machine "$MACHINE" >"$OUT/plan_auto.txt" 2>&1
  prc=$?
  # The pick is the first full command line plan prints. Prints ranks, args, the name of the
  # measured 16K row with the same layout (or empty) and plan's line, separated by \x1f; or nothing.
  pick=$(python3 - "$OUT/plan_auto.txt" "$OUT/runs.tsv" <<'PY'
import shlex, sys
DROP = {"--steps", "--log-json", "--machine", "--threads", "--data", "--save", "--save-every", "--resume"}
# the flags that make a layout; others (e.g. explicit tile sizes) do not make a pick "unmeasured"
LAYOUT = {"--model", "--seq", "--batch", "--hp", "--cp", "--zero", "--zero-group", "--checkpoint", "--precision",
          "--placement", "--ring-window", "--head-chunk", "--vocab-slice", "--offload-checkpoints", "--pack",
          "--attn-window", "--cp-layout"}
DEFAULTS = {"--hp": "1", "--cp": "1", "--batch": "1", "--zero": "0", "--checkpoint": "selective",
            "--precision": "fp32", "--model": "tiny", "--placement": "head-first", "--head-chunk": "all",
            "--vocab-slice": "0"}
def parse(words):
    """(ranks, train args without the flags this script sets) from a command's words."""
    np_, args = 1, None
    for i, w in enumerate(words):
        if w == "-np" and i + 1 < len(words):
            np_ = int(words[i + 1])
        if w == "train" and args is None and i > 0 and words[i - 1].endswith("longctx"):
            args = words[i + 1:]
    if args is None:
        return None
    kept, i = [], 0
    while i < len(args):
        w = args[i]
        if w in DROP:
            i += 2
            continue
        if w.startswith("--") and "=" in w and w.split("=", 1)[0] in DROP:
            i += 1
            continue
        kept.append(w)
        i += 1
    return np_, kept
def key(np_, args):
    d, flags, i = dict(DEFAULTS), [], 0
    while i < len(args):
        w = args[i]
        if i + 1 < len(args) and not args[i + 1].startswith("--"):
            if w in LAYOUT:
                d[w] = args[i + 1]
            i += 2
        else:
            if w in LAYOUT:
                flags.append(w)
            i += 1
    return (np_, tuple(sorted(d.items())), tuple(sorted(flags)))
line = None
for l in open(sys.argv[1]):
    if "longctx" in l and " train " in l + " ":
        line = l.strip().lstrip("$").strip()
        break
if line is None:
    sys.exit(0)
p = parse(shlex.split(line))
if p is None:
    sys.exit(0)
np_, args = p
if "--data" not in args:
    args = ["--data", "task:copy"] + args
match = ""
for row in open(sys.argv[2]):
    f = row.rstrip("\n").split("\t")
    if len(f) < 4 or not f[0].startswith("bs-16k-") or f[3] != "0":
        continue
    q = parse(shlex.split(f[2]))
    if q and key(*q) == key(np_, args):
        match = f[0]
print("\x1f".join([str(np_), " ".join(shlex.quote(a) for a in args), match, line]))
PY
)
  if [ "$prc" != 0 ] || [ -z "$pick" ]; then
    log "plan --auto gave no command line (exit $prc); see $OUT/plan_auto.txt"
    printf 'none\t\t\n' >"$OUT/auto.tsv"
  else
    IFS=$'\x1f' read -r pnp pargs pmatch pline <<<"$pick"
    if [ -n "$pmatch" ]; then
      log "plan --auto picked a measured layout: $pmatch"
      printf '%s\t%s\t%s\n' "$pmatch" "$pline" "measured" >"$OUT/auto.tsv"
    else
      eval "set -- $pargs"
      run_cfg auto-bs-16k-pick "$pnp" "$@"
      printf '%s\t%s\t%s\n' auto-bs-16k-pick "$pline" "run" >"$OUT/auto.tsv"
    fi
  fi
fi

# ---- summary ----
python3 - "$OUT" <<'EOF'
import json, math, os, shlex, statistics, sys

out = sys.argv[1]
runs = {}
for row in open(os.path.join(out, "runs.tsv")):
    f = row.rstrip("\n").split("\t")
    if len(f) >= 6:
        runs[f[0]] = {"np": int(f[1]), "cmd": f[2], "rc": f[3], "load": f[4], "secs": f[5]}

def flag(cmd, name, default):
    w = shlex.split(cmd)
    for i, x in enumerate(w[:-1]):
        if x == name:
            return w[i + 1]
    return default

rows = []
for name, r in runs.items():
    pred = meas = None
    path = os.path.join(out, "runs", name + ".jsonl")
    if r["rc"] == "0" and os.path.exists(path):
        lines = []
        for l in open(path):
            l = l.strip()
            if l:
                try:
                    lines.append(json.loads(l))
                except ValueError:
                    pass
        timed = lines[1:]  # step 1 is the warm-up
        ms = [x["step_seconds"] for x in timed if isinstance(x.get("step_seconds"), (int, float))]
        ps = [x["predicted_step_s"] for x in timed if isinstance(x.get("predicted_step_s"), (int, float))]
        meas = statistics.median(ms) if ms else None
        pred = statistics.median(ps) if ps else None
    err = 100.0 * (pred - meas) / meas if pred is not None and meas else None
    rows.append(dict(name=name, cmd=r["cmd"], np=r["np"], load=r["load"], rc=r["rc"], pred=pred, meas=meas,
                     err=err, batch=int(flag(r["cmd"], "--batch", "1"))))

fmt = lambda v, p=2: "NA" if v is None else f"{v:.{p}f}"
with open(os.path.join(out, "rows.tsv"), "w") as f:
    f.write("name\tcommand\tpredicted_s\tmeasured_s\terror_pct\n")
    for r in rows:
        f.write(f"{r['name']}\t{r['cmd']}\t{fmt(r['pred'], 4)}\t{fmt(r['meas'], 4)}\t{fmt(r['err'], 1)}\n")

print(f"time model vs measured, {len(rows)} configurations (median of steps 2-3; error = (predicted - measured) / measured)")
print()
print("| configuration | ranks | predicted s | measured s | error % | 1-min load after |")
print("|---|---|---|---|---|---|")
for r in rows:
    note = "" if r["rc"] == "0" else f" (exit {r['rc']})"
    print(f"| {r['name']}{note} | {r['np']} | {fmt(r['pred'])} | {fmt(r['meas'])} | {fmt(r['err'], 1)} | {r['load']} |")
print()

ok = [r for r in rows if r["err"] is not None]
failed = [r["name"] for r in rows if r["err"] is None]
if failed:
    print(f"no prediction or measurement for: {', '.join(failed)}")
if ok:
    ae = [abs(r["err"]) for r in ok]
    worst = max(ok, key=lambda r: abs(r["err"]))
    print(f"absolute relative error over {len(ok)} rows: median {statistics.median(ae):.1f}%, "
          f"worst {abs(worst['err']):.1f}% ({worst['name']})")

def tau_b(x, y):
    """Kendall tau-b over all pairs (ties in either variable handled as in tau-b)."""
    n = len(x)
    nc = nd = tx = ty = 0
    for i in range(n):
        for j in range(i + 1, n):
            dx, dy = x[i] - x[j], y[i] - y[j]
            if dx == 0 and dy == 0:
                tx += 1; ty += 1
            elif dx == 0:
                tx += 1
            elif dy == 0:
                ty += 1
            elif (dx > 0) == (dy > 0):
                nc += 1
            else:
                nd += 1
    n0 = n * (n - 1) // 2
    den = math.sqrt((n0 - tx) * (n0 - ty))
    return (nc - nd) / den if den else float("nan"), nc, nd

if len(ok) >= 2:
    t, nc, nd = tau_b([r["pred"] for r in ok], [r["meas"] for r in ok])
    print(f"Kendall tau-b (predicted vs measured step time, {len(ok)} rows, {len(ok) * (len(ok) - 1) // 2} pairs): "
          f"{t:.3f} ({nc} concordant, {nd} discordant)")

auto_path = os.path.join(out, "auto.tsv")
if os.path.exists(auto_path) and os.path.getsize(auto_path):
    a = open(auto_path).read().rstrip("\n").split("\t")
    print()
    print("plan --auto, bench-s at S = 16K on 2 ranks (seconds per sequence = step s / batch):")
    if a[0] == "none":
        print("  plan --auto printed no command line (see plan_auto.txt)")
    else:
        print(f"  pick: {a[1]}")
        cands = [r for r in ok if r["name"].startswith("bs-16k-") or r["name"] == "auto-bs-16k-pick"]
        for r in sorted(cands, key=lambda r: r["meas"] / r["batch"]):
            tag = "  <- plan's pick" if r["name"] == a[0] else ""
            print(f"  {r['name']}: measured {r['meas'] / r['batch']:.2f} s/seq, predicted {r['pred'] / r['batch']:.2f} s/seq{tag}")
        pick = [r for r in cands if r["name"] == a[0]]
        if pick and cands:
            best = min(cands, key=lambda r: r["meas"] / r["batch"])
            ratio = (pick[0]["meas"] / pick[0]["batch"]) / (best["meas"] / best["batch"])
            print(f"  pick / best measured = {ratio:.3f} ({'the pick is the fastest measured' if best is pick[0] else 'best: ' + best['name']})")
        else:
            print("  the pick has no measurement (its run failed?)")
EOF
log "done: $OUT/rows.tsv"
