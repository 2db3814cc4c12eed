#!/usr/bin/env bash
# The GPU checks of the CUDA backend in three stages, each one call of the device tool (at
# most 10 minutes a call, about 15 minutes of GPU time in all with the machine's start, at
# most 8 files back). Each stage ends within its own budget (every command runs under a
# `timeout` cut to what is left of it), prints each result row the moment it is known (a
# killed call still shows the rows before), and leaves two files in $OUT: its rows and one
# tarball of its logs.
#
#   here:  cmake --build build && tools/gpu_bundle.sh            (gpu-bundle.tar.xz, < 36 MiB)
#   there: tools/gpu_check.sh STAGE [gpu-bundle.tar.xz]          (device tool: carry the bundle)
#   CI:    tools/gpu_check.sh --dry-run STAGE|all [BUILD_DIR]    (ctest gpu_check_dry)
#
# --dry-run (or GPU_CHECK_DRY=1) runs every stage's logic on this machine with the binaries
# of BUILD_DIR (default build) and `--device private` (the CPU stand-in for a device with its
# own memory, src/backend/private/) in place of cuda, at tiny sizes; what needs real CUDA
# (test_cuda, compute-sanitizer, PyTorch) is a "skip" row saying so.
#
# Expected on one H100 (SXM or PCIe, 16 host cores), with why; budgets are ~1.3-2x these:
#  stage 1, correctness, budget 240 s (expected ~150 s):
#    unpack the bundle                       ~3 s   (xz of ~35 MiB on 16 cores)
#    ldd of the binaries                     <1 s   (exit 2 at once if a library is missing)
#    test_cuda, fast attention tier          ~40-90 s (every op at small sizes against the CPU,
#                                            CPU side dominant; CUDA context + module load ~2 s;
#                                            timeout 150). The reference tier (LONGCTX_CUDA_FLASH=ref)
#                                            only if the fast one fails: ~40-90 s, timeout 100
#    train tiny/demo x fp32/bf16, cuda vs cpu + a bitwise cuda repeat, 10 steps of 2 x 256
#                                            ~8-12 s each (the CPU run in parallel with the GPU's;
#                                            start-up ~2 s per run): ~40 s
#    compute-sanitizer memcheck, 1 tiny step ~30-60 s (10-100x slower kernels, module
#                                            instrumentation); "not supported here" where the
#                                            virtualised device refuses it; timeout 75
#  stage 2, speed, budget 300 s (expected ~120-180 s):
#    bench_cuda_attn 8K, 32K (GQA 32/8, D 128, bf16)  ~10 s: inputs drawn in parallel (~0.3 s),
#                                            32K forward 8.8 TFLOP ~30 ms at 300 TFLOPS (~180 ms
#                                            at 50), backward 2.5x; 6 calls each
#    PyTorch SDPA flash, same shapes         ~15 s (torch import and flash init ~8 s); "no torch"
#                                            when python3 cannot import torch with CUDA
#    1B-shaped model (Llama-3.2-1B shapes), one 32K step: make it (transformers, random
#                                            weights, ~30 s for 5 GB of safetensors), longctx 3
#                                            steps (~6e14 FLOP each at ~200 TFLOPS: ~3 s, + load
#                                            ~10 s), PyTorch + transformers 1 + 2 steps (~25 s);
#                                            without torch: longctx on the demo preset at 32K
#  stage 3, offload, ranks, stall, budget 300 s (expected ~150-200 s):
#    --offload-optimizer vs without, tiny fp32 zero 0 and demo bf16 zero 3: bit for bit
#                                            ~5 s a run, 4 runs ~20 s
#    2-4 ranks on the one GPU vs one rank (cp 2; hp 2 zero 3; hp 2 x cp 2; cp 2 zero 1 bf16)
#                                            ~10-15 s each (mpirun start, 4 contexts on one
#                                            GPU): ~70 s; "needs mpirun" without one
#    a stalled rank (SIGSTOP) ends the job within --timeout 10: ~15-20 s
#    compute-sanitizer racecheck, 1 tiny step (only with >= 100 s left) ~60-90 s
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

DRY=${GPU_CHECK_DRY:-0}
[ "${1:-}" = --dry-run ] && DRY=1 && shift
STAGE="${1:-}"
case "$STAGE" in
  1 | 2 | 3) ;;
  all) [ "$DRY" = 1 ] || { echo "gpu_check: 'all' is for --dry-run; on a GPU run stages 1, 2, 3 as separate calls" >&2; exit 2; } ;;
  *) echo "usage: tools/gpu_check.sh [--dry-run] 1|2|3 [gpu-bundle.tar.xz | BUILD_DIR (dry run)]" >&2; exit 2 ;;
esac
if [ "$STAGE" = all ]; then
  rc=0
  for s in 1 2 3; do bash "$0" --dry-run $s "${2:-build}" || rc=1; done
  exit $rc
fi

OUTDIR="${OUT:-$ROOT/gpu-check-out}"
mkdir -p "$OUTDIR"
W=$(mktemp -d)
LOGS="$W/logs-stage$STAGE"
mkdir -p "$LOGS"
ROWS="$OUTDIR/gpu-check-stage$STAGE-rows.txt"
: >"$ROWS"
# the logs leave as one tarball, however the stage ends
finish() {
  tar -C "$W" -czf "$OUTDIR/gpu-check-stage$STAGE-logs.tar.gz" "logs-stage$STAGE" 2>/dev/null
  rm -rf "$W"
}
trap finish EXIT

T0=$(date +%s)
if [ "$DRY" = 1 ]; then
  B="${2:-build}"
  BIN="$B" DEV=private DEV0=private
  BUDGET=$([ "$STAGE" = 3 ] && echo 90 || echo 60)
  MPIRUN=$(command -v mpirun || true)
  [ -n "$MPIRUN" ] && MPIRUN="$MPIRUN --allow-run-as-root --oversubscribe"
  THR=1
else
  BUNDLE="${2:-gpu-bundle.tar.xz}"
  tar -C "$W" -xJf "$BUNDLE" || { echo "gpu_check: cannot unpack $BUNDLE (tools/gpu_bundle.sh makes it)"; exit 2; }
  G="$W/gpu-bundle"
  # the bundle's libraries (OpenBLAS, oneDNN, cJSON, Open MPI's, cuBLASLt) and its Open MPI, relocated
  . "$G/env.sh"
  BIN="$G/bin" DEV=cuda DEV0=cuda:0
  BUDGET=$([ "$STAGE" = 1 ] && echo 240 || echo 300)
  MPIRUN=""
  [ -x "$G/ompi/bin/mpirun" ] && MPIRUN="$G/ompi/bin/mpirun --oversubscribe"
  [ -z "$MPIRUN" ] && command -v mpirun >/dev/null && MPIRUN="mpirun --oversubscribe"
  THR=8
fi
BUDGET=${GPU_CHECK_BUDGET:-$BUDGET} # (tests cut it to see the stage stop in time)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=$THR
LC="$BIN/longctx"
FAILS=0 NOTRUN=0

# A result row, printed now and kept in $ROWS: check, result (ok, FAIL, skip, n/a), detail.
# A check whose command the budget left unstarted is "skip" (counted apart: exit 3), not FAIL.
row() {
  local line res=$2
  case "$res:$3" in FAIL:*"not started: budget spent"*) res=skip NOTRUN=$((NOTRUN + 1)) ;; esac
  line=$(printf '%-46s %-5s %4ss  %s' "$1" "$res" "$(($(date +%s) - T0))" "$3")
  echo "$line"
  echo "$line" >>"$ROWS"
  [ "$res" = FAIL ] && FAILS=$((FAILS + 1))
  return 0
}
# Seconds a command may take: what it wants, cut to what is left of the stage's budget
# (less 5 s to pack the logs); 0 when too little is left to start it.
tmo() {
  local left=$((BUDGET - ($(date +%s) - T0) - 5))
  if [ "$left" -lt 3 ]; then echo 0; elif [ "$1" -lt "$left" ]; then echo "$1"; else echo "$left"; fi
}
# run SECONDS LOG CMD...: the command under timeout, its output in LOG; 125 when not started.
run() {
  local s
  s=$(tmo "$1")
  shift
  local log=$1
  shift
  [ "$s" -gt 0 ] || { echo "not started: the stage's budget is spent" >"$log"; return 125; }
  timeout -k 5 "$s" "$@" >"$log" 2>&1
}
why() { case $1 in 0) echo "rc 0" ;; 124 | 137) echo "timed out" ;; 125) echo "not started: budget spent" ;; *) echo "rc $1" ;; esac; }
# per-step losses of a --log-json file, and the worst relative difference of two such files
losses() { grep -o '"step":[0-9]*,"loss":[-0-9.e+]*' "$1" 2>/dev/null | sed 's/.*"loss"://'; }
worst_rel() { # a b steps: 99 when either lacks a step
  paste <(losses "$1") <(losses "$2") | awk -v n="$3" 'NF == 2 {d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1;
    r = d / (a > 0 ? a : 1); if (r > w) w = r; k++} END {printf "%.3g", k == n ? w + 0 : 99}'
}
le() { awk -v a="$1" -v b="$2" 'BEGIN {exit !(a + 0 <= b + 0)}'; }

row "stage $STAGE" info "$([ "$DRY" = 1 ] && echo "dry run on the private device, binaries of $B" || echo "budget $BUDGET s")"
# Every library the binaries load must resolve: a missing one ends the stage at once.
missing=$(ldd "$LC" "$BIN/test_cuda" "$BIN/bench_cuda_attn" 2>&1 | grep "not found" | sort -u | tr -s ' \t' ' ')
if [ -n "$missing" ]; then
  row "ldd of the bundled binaries" FAIL "missing: $missing"
  exit 2
fi
row "ldd of the bundled binaries" ok "every library found"

# train with cpu and dev side by side (the CPU run in parallel with the device's), then a
# bitwise repeat on the device: one row.
train_pair() { # model precision seq batch steps
  local m=$1 p=$2 seq=$3 bt=$4 st=$5
  local args=(train --model "$m" --data task:copy --seq "$seq" --batch "$bt" --steps "$st" --precision "$p" --warmup 2)
  local tag="$m-$p"
  run 90 "$LOGS/$tag-cpu.txt" "$LC" "${args[@]}" --device cpu --threads "$THR" --log-json "$LOGS/$tag-cpu.jsonl" &
  local pid=$!
  run 90 "$LOGS/$tag-dev.txt" "$LC" "${args[@]}" --device "$DEV" --threads 2 --log-json "$LOGS/$tag-dev.jsonl"
  local r2=$?
  wait $pid
  local r1=$?
  run 60 "$LOGS/$tag-dev2.txt" "$LC" "${args[@]}" --device "$DEV" --threads 2 --log-json "$LOGS/$tag-dev2.jsonl"
  local r3=$?
  local name="train $m $p, $st steps, $DEV vs cpu"
  if [ $r1 -ne 0 ] || [ $r2 -ne 0 ] || [ $r3 -ne 0 ]; then
    row "$name" FAIL "cpu $(why $r1), $DEV $(why $r2), repeat $(why $r3): $(grep -h -m1 error "$LOGS/$tag-dev.txt" "$LOGS/$tag-cpu.txt" | head -1)"
    return
  fi
  # fp32: 1e-5 relative per step; bf16: 2e-2 (tests/test_cuda.c says why)
  local bound w same res=ok
  bound=$([ "$p" = fp32 ] && echo 1e-5 || echo 2e-2)
  w=$(worst_rel "$LOGS/$tag-cpu.jsonl" "$LOGS/$tag-dev.jsonl" "$st")
  same=$(cmp -s <(losses "$LOGS/$tag-dev.jsonl") <(losses "$LOGS/$tag-dev2.jsonl") && echo identical || echo DIFFER)
  le "$w" "$bound" && [ "$same" = identical ] || res=FAIL
  row "$name" $res "worst relative loss difference $w (bound $bound); repeat on $DEV $same"
}

# compute-sanitizer TOOL on one tiny step; "n/a" where the device or runtime refuses it.
sanitizer() {
  local tool=$1 want=$2
  if [ "$DRY" = 1 ]; then row "compute-sanitizer $tool" skip "needs CUDA (dry run)"; return; fi
  local cs
  cs=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
  if [ -z "$cs" ]; then row "compute-sanitizer $tool" n/a "not on PATH or under /usr/local/cuda*/bin here"; return; fi
  run "$want" "$LOGS/sanitizer-$tool.txt" "$cs" --tool "$tool" --error-exitcode 9 "$LC" train --model tiny \
    --data task:copy --seq 128 --steps 1 --device cuda --threads 4
  local rc=$?
  if grep -qiE 'not supported|unsupported|Device not supported' "$LOGS/sanitizer-$tool.txt"; then
    row "compute-sanitizer $tool, 1 tiny step" n/a "not supported here: $(grep -m1 -iE 'not supported|unsupported' "$LOGS/sanitizer-$tool.txt" | cut -c1-120)"
  else
    row "compute-sanitizer $tool, 1 tiny step" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(why $rc): $(grep -m1 'ERROR SUMMARY' "$LOGS/sanitizer-$tool.txt")"
  fi
}

stage1() {
  if [ "$DRY" = 1 ]; then row "GPU" skip "dry run: $("$BIN/bench_cuda_attn" --device private --shape 1 1 8 16 2>/dev/null | head -1)"
  else
    if ! nvidia-smi -L >"$LOGS/gpu.txt" 2>&1; then
      row "GPU" FAIL "nvidia-smi sees no GPU or driver here: $(head -1 "$LOGS/gpu.txt" | cut -c1-100)"
      exit 2
    fi
    nvidia-smi >>"$LOGS/gpu.txt" 2>&1
    row "GPU" info "$(head -1 "$LOGS/gpu.txt")"
  fi
  # test_cuda: the fast attention tier; the reference tier only when the fast one fails
  if [ "$DRY" = 1 ]; then
    row "test_cuda (fast tier)" skip "needs CUDA (dry run)"
  else
    run 150 "$LOGS/test_cuda_fast.txt" "$BIN/test_cuda"
    local rc=$?
    row "test_cuda (fast attention tier)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(why $rc), $(grep -c '^FAIL' "$LOGS/test_cuda_fast.txt") failed checks; $(tail -1 "$LOGS/test_cuda_fast.txt" | cut -c1-100)"
    if [ $rc -ne 0 ] && [ $rc -ne 77 ]; then # (77: no device: the reference tier would say the same)
      run 100 "$LOGS/test_cuda_ref.txt" env LONGCTX_CUDA_FLASH=ref "$BIN/test_cuda"
      rc=$?
      row "test_cuda (reference tier: the fast one failed)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(why $rc), $(grep -c '^FAIL' "$LOGS/test_cuda_ref.txt") failed checks (ok here: the fault is the fast attention's)"
    fi
  fi
  if [ "$DRY" = 1 ]; then
    train_pair tiny fp32 64 1 3; train_pair tiny bf16 64 1 3
    row "train demo fp32/bf16" skip "dry run: tiny only (demo takes ~10 s a run on the private device)"
  else
    train_pair tiny fp32 256 2 10; train_pair tiny bf16 256 2 10; train_pair demo fp32 256 2 10; train_pair demo bf16 256 2 10
  fi
  sanitizer memcheck 75
}

# a torch that sees the GPU, and transformers (dry run: never); asked once (an import is ~5 s)
TORCH=0 TF=0
probe_torch() {
  [ "$DRY" = 1 ] && return
  timeout 60 python3 -c 'import torch; assert torch.cuda.is_available()' >/dev/null 2>&1 && TORCH=1
  [ $TORCH = 1 ] && timeout 60 python3 -c 'import transformers' >/dev/null 2>&1 && TF=1
  return 0
}
have_torch() { [ $TORCH = 1 ]; }
have_tf() { [ $TF = 1 ]; }

stage2() {
  probe_torch
  local lens=(8192 32768) shape=() tfl
  [ "$DRY" = 1 ] && lens=(128 256) shape=(--shape 4 2 32)
  run 120 "$LOGS/bench-attn-longctx.txt" "$BIN/bench_cuda_attn" --device "$DEV" "${shape[@]}" "${lens[@]}"
  local rc=$?
  tfl=$(awk '$2 == "fwd" || $2 == "bwd" {printf "%s %s %s ms %s TF; ", $1, $2, $3, $4} /inputs drawn/ {printf "%s", $0}' "$LOGS/bench-attn-longctx.txt")
  row "attention ${lens[*]} (longctx, $DEV)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(why $rc): $tfl"
  if have_torch; then
    run 120 "$LOGS/bench-attn-sdpa.txt" python3 bench/sdpa_bench.py "${lens[@]}"
    rc=$?
    row "attention ${lens[*]} (PyTorch SDPA flash)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(why $rc): $(awk '$2 == "fwd" || $2 == "bwd" {printf "%s %s %s ms %s TF; ", $1, $2, $3, $4}' "$LOGS/bench-attn-sdpa.txt")"
  else
    row "attention (PyTorch SDPA flash)" skip "no torch$([ "$DRY" = 1 ] && echo " (dry run)")"
  fi
  # one 32K step of a 1B-shaped model, longctx beside PyTorch + transformers
  local S=32768 model=demo steps=3
  [ "$DRY" = 1 ] && S=128 steps=2 model=tiny
  if have_tf; then
    if run 90 "$LOGS/make-1b.txt" python3 bench/torch_gpu_step.py --make llama-3.2-1b --out "$W/llama-3.2-1b"; then
      model="$W/llama-3.2-1b"
    else row "make the 1B model (transformers)" FAIL "$(tail -1 "$LOGS/make-1b.txt")"; fi
  else
    row "1B-shaped model" skip "no torch + transformers$([ "$DRY" = 1 ] && echo " (dry run)") to make it; longctx on the $model preset instead"
  fi
  run 120 "$LOGS/step-longctx.txt" "$LC" train --model "$model" --data task:copy --seq $S --steps $steps --warmup 0 \
    --precision bf16 --device "$DEV" --threads "$THR" --log-json "$LOGS/step-longctx.jsonl"
  rc=$?
  row "longctx ${model##*/} S $S bf16, $steps steps" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(why $rc): last step $(grep -o '"tokens_per_s":[0-9.e+]*\|"step_seconds":[0-9.e+]*\|"peak_bytes":[0-9]*' "$LOGS/step-longctx.jsonl" 2>/dev/null | tail -3 | tr '\n' ' ')"
  if [ -d "$model" ]; then
    run 120 "$LOGS/step-torch.txt" python3 bench/torch_gpu_step.py --model "$model" --seq $S --steps 2
    rc=$?
    row "PyTorch + transformers 1B S $S bf16" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(why $rc): $(tail -1 "$LOGS/step-torch.txt" | grep -o '"tokens_per_s": [0-9.]*\|"tflops": [0-9.]*\|"peak_device_bytes": [0-9]*' | tr '\n' ' ')"
  fi
}

# the losses and gradient norms of a --log-json file, exactly
lg() { python3 -c "import json,sys; [print(repr(r['loss']), repr(r['grad_norm'])) for r in map(json.loads, open(sys.argv[1])) if 'step_seconds' in r]" "$1" 2>/dev/null; }

stage3() {
  local seq=512 steps=5 cfg
  [ "$DRY" = 1 ] && seq=64 steps=2
  # --offload-optimizer: the same bits as without; the device's peak holds no model states
  for cfg in "tiny fp32 0" "demo bf16 3"; do
    set -- $cfg
    [ "$DRY" = 1 ] && [ "$1" = demo ] && set -- tiny bf16 3
    local args=(train --model "$1" --data task:copy --seq $seq --steps $steps --precision "$2" --zero "$3" --device "$DEV" --threads 2)
    run 60 "$LOGS/off-$1-$2-a.txt" "$LC" "${args[@]}" --log-json "$LOGS/off-$1-$2-a.jsonl"; local r1=$?
    run 60 "$LOGS/off-$1-$2-b.txt" "$LC" "${args[@]}" --offload-optimizer --log-json "$LOGS/off-$1-$2-b.jsonl"; local r2=$?
    local same res=ok
    same=$(cmp -s <(lg "$LOGS/off-$1-$2-a.jsonl") <(lg "$LOGS/off-$1-$2-b.jsonl") && [ -n "$(lg "$LOGS/off-$1-$2-a.jsonl")" ] && echo identical || echo DIFFER)
    [ $r1 -eq 0 ] && [ $r2 -eq 0 ] && [ "$same" = identical ] && grep -q 'params 0.0 KiB, grads [^,]*, optimizer 0.0 KiB' "$LOGS/off-$1-$2-b.txt" || res=FAIL
    row "offload-optimizer $1 $2 zero $3" $res "$(why $r1)/$(why $r2), losses and norms $same; $(grep -o -m1 'peak memory on [^:]*: params [^,]*, grads [^,]*, optimizer [^,]*' "$LOGS/off-$1-$2-b.txt")"
  done
  # several ranks on the one device against one rank on it
  if [ -z "$MPIRUN" ]; then
    row "ranks on one GPU" skip "needs mpirun: none in the bundle or on PATH (tools/gpu_bundle.sh packs Open MPI's)"
  else
    local one=(--model demo --data task:copy --seq $seq --batch 2 --steps 4 --device "$DEV0" --threads 2)
    [ "$DRY" = 1 ] && one=(--model tiny --data task:copy --seq $seq --batch 2 --steps 2 --device "$DEV0" --threads 1)
    local n=${one[9]} lay
    run 60 "$LOGS/ranks-1.txt" "$LC" train "${one[@]}" --log-json "$LOGS/ranks-1.jsonl"
    run 60 "$LOGS/ranks-1-bf16.txt" "$LC" train "${one[@]}" --precision bf16 --log-json "$LOGS/ranks-1-bf16.jsonl"
    local lays=("2:--cp 2" "2:--hp 2 --zero 3" "4:--hp 2 --cp 2" "2:--cp 2 --zero 1 --precision bf16")
    [ "$DRY" = 1 ] && lays=("2:--cp 2" "2:--hp 2 --zero 3 --precision bf16")
    for lay in "${lays[@]}"; do
      local np=${lay%%:*} flags=${lay#*:} ref="$LOGS/ranks-1.jsonl" bound=1e-5 tag
      case "$flags" in *bf16*) ref="$LOGS/ranks-1-bf16.jsonl" bound=2e-2 ;; esac
      tag=$(echo "$np $flags" | tr -c 'a-z0-9' '_')
      run 90 "$LOGS/ranks-$tag.txt" $MPIRUN -np "$np" "$LC" train "${one[@]}" $flags --log-json "$LOGS/ranks-$tag.jsonl"
      local rc=$? w
      w=$(worst_rel "$ref" "$LOGS/ranks-$tag.jsonl" "$n")
      row "$np ranks on one device: $flags" "$([ $rc -eq 0 ] && le "$w" "$bound" && echo ok || echo FAIL)" "$(why $rc), worst relative loss difference $w (bound $bound)"
    done
    # a stalled rank (SIGSTOP at step 3, the test hook) ends the job within --timeout
    local to=10 t0 el
    [ "$DRY" = 1 ] && to=4
    t0=$(date +%s.%N)
    LONGCTX_TEST_STOP=1:3:forward run 90 "$LOGS/stall.txt" $MPIRUN -np 2 "$LC" train --model tiny --data task:copy \
      --seq 64 --steps 50 --cp 2 --device "$DEV0" --threads 1 --timeout $to
    rc=$?
    el=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
    row "stalled rank (--timeout $to)" "$([ $rc -eq 3 ] && le "$el" $((to * 6)) && echo ok || echo FAIL)" "$(why $rc) (want 3) after $el s (bound $((to * 6)) s): $(grep -m1 -o 'stopped responding.*' "$LOGS/stall.txt" | cut -c1-80)"
  fi
  if [ "$DRY" = 1 ] || [ "$(tmo 100)" -ge 100 ]; then sanitizer racecheck 100
  else row "compute-sanitizer racecheck" skip "under 100 s left of the stage's budget"; fi
}

stage$STAGE
el=$(($(date +%s) - T0))
row "stage $STAGE done" "$([ $FAILS -eq 0 ] && echo ok || echo FAIL)" "$FAILS failed rows, $NOTRUN not started (budget), $el s of a $BUDGET s budget; logs: $OUTDIR/gpu-check-stage$STAGE-logs.tar.gz"
# 0: every check passed; 1: a check failed; 3: none failed but the budget left some unrun
[ $FAILS -eq 0 ] || exit 1
[ $NOTRUN -eq 0 ] || exit 3
