#!/usr/bin/env bash
# Every GPU check of the CUDA backend in one call, on a machine with an NVIDIA GPU, the
# driver and the CUDA toolkit (our H200 machine: it lacks OpenBLAS, oneDNN, cJSON and Open
# MPI, so the binaries come built, with those libraries, in gpu-bundle.tar.xz from
# tools/gpu_bundle.sh). Logs go to $OUT (or ./gpu-check-logs); a summary table is printed
# last. Re-runnable: it only reads the bundle and writes logs.
#
#   here:  make build && tools/gpu_bundle.sh
#   there: tools/gpu_check.sh [gpu-bundle.tar.xz]        (device tool: carry gpu-bundle.tar.xz)
#
# Checks:
#  1. test_cuda: every op of the CUDA backend against the CPU backend on random inputs
#     with poisoned surroundings (bounds in tests/test_cuda.c), then training steps of the
#     tiny model (Llama GQA, Qwen2 biases, Qwen3 q/k norms; fp32 and bf16) on the GPU vs
#     the CPU, and two GPU runs bitwise identical;
#  2. the same with LONGCTX_CUDA_FLASH=ref (the simple attention kernels): a fault only in
#     (1) is the fast attention path's;
#  3. `longctx train` end to end, 20 steps, --device cuda vs cpu (tiny, demo; fp32 and
#     bf16), losses compared step by step; twice on the GPU, identical;
#  4. compute-sanitizer memcheck and racecheck on one tiny step (where the runtime allows);
#  5. the attention kernels alone at 8K, 32K, 128K beside PyTorch's SDPA flash;
#  6. training throughput: SmolLM2-135M- and Llama-3.2-1B-shaped models (random weights,
#     made here by bench/torch_gpu_step.py) at 32K, longctx beside PyTorch + transformers.
set -uo pipefail
cd "$(dirname "$0")/.."
BUNDLE="${1:-gpu-bundle.tar.xz}"
LOGS="${OUT:-$PWD/gpu-check-logs}"
mkdir -p "$LOGS"
W=$(mktemp -d)
tar -C "$W" -xJf "$BUNDLE" || { echo "gpu_check: cannot unpack $BUNDLE (tools/gpu_bundle.sh makes it)"; exit 2; }
G="$W/gpu-bundle"
export LD_LIBRARY_PATH="$G/lib:${LD_LIBRARY_PATH:-}"
# Open MPI from the bundle, relocated (singleton runs of longctx start an orted)
export OPAL_PREFIX="$G/ompi" OPAL_BINDIR="$G/ompi/bin" OPAL_LIBDIR="$G/ompi/lib" OPAL_PKGLIBDIR="$G/ompi/lib/openmpi3"
export OPAL_DATADIR="$G/ompi/share" OPAL_PKGDATADIR="$G/ompi/share/openmpi" PATH="$G/ompi/bin:$PATH"
export PMIX_MCA_mca_base_component_path="$G/ompi/pmix2/lib/pmix" OMPI_MCA_mca_base_component_path="$G/ompi/lib/openmpi3"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=8
LC="$G/bin/longctx"
declare -a ROWS
row() { ROWS+=("$(printf '%-44s %-6s %s' "$1" "$2" "$3")"); }

nvidia-smi -L >"$LOGS/gpu.txt" 2>&1; nvidia-smi >>"$LOGS/gpu.txt" 2>&1
row "GPU" "info" "$(head -1 "$LOGS/gpu.txt")"

# 1, 2: the ops test and the training equivalence in it
for mode in fast ref; do
  t0=$(date +%s)
  if [ $mode = ref ]; then env LONGCTX_CUDA_FLASH=ref timeout 600 "$G/bin/test_cuda" >"$LOGS/test_cuda_$mode.txt" 2>&1
  else timeout 600 "$G/bin/test_cuda" >"$LOGS/test_cuda_$mode.txt" 2>&1; fi
  rc=$?
  fails=$(grep -c '^FAIL' "$LOGS/test_cuda_$mode.txt")
  row "test_cuda (attention: $mode)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "rc $rc, $fails failed checks, $(( $(date +%s) - t0 )) s; $(tail -1 "$LOGS/test_cuda_$mode.txt")"
done

# 3: the program end to end, per-step losses on the GPU vs the CPU
losses() { grep -o '"loss":[-0-9.e]*' "$1" | cut -d: -f2; }
for cfg in "tiny fp32" "tiny bf16" "demo fp32" "demo bf16"; do
  set -- $cfg
  m=$1 p=$2 name="train $1 $2, 20 steps"
  args=(train --model "$m" --data task:copy --seq 256 --batch 2 --steps 20 --precision "$p" --threads 8)
  timeout 300 "$LC" "${args[@]}" --device cpu --log-json "$LOGS/$m-$p-cpu.jsonl" >"$LOGS/$m-$p-cpu.txt" 2>&1
  r1=$?
  timeout 300 "$LC" "${args[@]}" --device cuda --log-json "$LOGS/$m-$p-cuda.jsonl" >"$LOGS/$m-$p-cuda.txt" 2>&1
  r2=$?
  timeout 300 "$LC" "${args[@]}" --device cuda --log-json "$LOGS/$m-$p-cuda2.jsonl" >"$LOGS/$m-$p-cuda2.txt" 2>&1
  r3=$?
  if [ $r1 -ne 0 ] || [ $r2 -ne 0 ] || [ $r3 -ne 0 ]; then
    row "$name" "FAIL" "rc cpu $r1, cuda $r2, $r3: $(grep -h error "$LOGS/$m-$p-cuda.txt" | head -1)"
    continue
  fi
  # fp32: 1e-5 relative per step; bf16: 2e-2 (tests/test_cuda.c says why)
  bound=$([ "$p" = fp32 ] && echo 1e-5 || echo 2e-2)
  worst=$(paste <(losses "$LOGS/$m-$p-cpu.jsonl") <(losses "$LOGS/$m-$p-cuda.jsonl") |
    awk '{d=$1-$2; if (d<0) d=-d; r=d/($1<0?-$1:$1); if (r>w) w=r} END {printf "%.3g", w}')
  same=$(cmp -s <(losses "$LOGS/$m-$p-cuda.jsonl") <(losses "$LOGS/$m-$p-cuda2.jsonl") && echo identical || echo DIFFER)
  ok=$(awk -v w="$worst" -v b="$bound" 'BEGIN {print (w <= b) ? "ok" : "FAIL"}')
  [ "$same" = identical ] || ok=FAIL
  row "$name" "$ok" "worst relative loss difference $worst (bound $bound); two GPU runs $same"
done

# 4: compute-sanitizer on one tiny step
if command -v compute-sanitizer >/dev/null; then
  for tool in memcheck racecheck; do
    timeout 300 compute-sanitizer --tool $tool --error-exitcode 9 "$LC" train --model tiny --data task:copy --seq 128 \
      --steps 1 --device cuda --threads 4 >"$LOGS/sanitizer-$tool.txt" 2>&1
    rc=$?
    row "compute-sanitizer $tool, 1 tiny step" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "rc $rc: $(grep -m1 -E 'ERROR SUMMARY|refus|not supported' "$LOGS/sanitizer-$tool.txt")"
  done
else
  row "compute-sanitizer" "skip" "not on PATH"
fi

# 5: the attention kernels alone, ours and PyTorch's SDPA flash, same shapes, same call
timeout 300 "$G/bin/bench_cuda_attn" >"$LOGS/bench-attn-longctx.txt" 2>&1
rc=$?
row "attention kernels (longctx)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(awk 'NR>2{printf "%s %s %s TF; ", $1, $2, $4}' "$LOGS/bench-attn-longctx.txt")"
timeout 300 python3 bench/sdpa_bench.py >"$LOGS/bench-attn-sdpa.txt" 2>&1
rc=$?
row "attention kernels (PyTorch SDPA flash)" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(awk 'NR>2{printf "%s %s %s TF; ", $1, $2, $4}' "$LOGS/bench-attn-sdpa.txt")"

# 6: training throughput on the GPU, longctx beside PyTorch + transformers (bf16, SDPA
# flash, gradient checkpointing), the same random-weight HF models and sequence lengths
for m in smollm2-135m llama-3.2-1b; do
  python3 bench/torch_gpu_step.py --make $m --out "$W/$m" >"$LOGS/make-$m.txt" 2>&1 || { row "model $m" FAIL "$(tail -1 "$LOGS/make-$m.txt")"; continue; }
  for S in 32768; do
    timeout 300 "$LC" train --model "$W/$m" --data task:copy --seq $S --steps 4 --warmup 0 --precision bf16 --device cuda \
      --threads 8 --log-json "$LOGS/bench-$m-$S.jsonl" >"$LOGS/bench-$m-$S.txt" 2>&1
    rc=$?
    row "longctx $m S $S bf16" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(grep -E '^step' "$LOGS/bench-$m-$S.txt" | tail -1 | tr -s ' ')"
    timeout 300 python3 bench/torch_gpu_step.py --model "$W/$m" --seq $S >"$LOGS/torch-$m-$S.txt" 2>&1
    rc=$?
    row "pytorch $m S $S bf16" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(tail -1 "$LOGS/torch-$m-$S.txt" | grep -o '"tokens_per_s": [0-9.]*\|"tflops": [0-9.]*\|"peak_device_bytes": [0-9]*' | tr '\n' ' ')"
  done
done
bench() { # name, args...: one longctx run on the GPU, its last step line
  local name=$1; shift
  timeout 300 "$LC" train "$@" --device cuda --threads 8 >"$LOGS/bench-$name.txt" 2>&1
  local rc=$?
  row "bench $name" "$([ $rc -eq 0 ] && echo ok || echo FAIL)" "$(grep -E '^step' "$LOGS/bench-$name.txt" | tail -1 | tr -s ' ')"
}
bench demo-8k-bf16 --model demo --data task:copy --seq 8192 --steps 4 --precision bf16 --checkpoint auto

printf '\n%-44s %-6s %s\n' "check" "result" "detail"
printf '%s\n' "${ROWS[@]}"
rm -rf "$W"
