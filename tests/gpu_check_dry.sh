#!/usr/bin/env bash
# tools/gpu_check.sh's logic without a GPU (issue 49): every stage in --dry-run on the
# private device ends within its budget (60, 60, 90 s here; 240, 300, 300 s on a GPU), with
# rc 0, every row it owes printed on stdout as it goes and kept in its rows file, and its logs
# in one tarball (2 files a stage: at most 8 come back from a device call). A stage whose
# budget is cut to 12 s stops in time, with rows saying what was not run, and fails.
#   tests/gpu_check_dry.sh SRC_DIR BUILD_DIR
set -u
SRC="$1"
BUILD="$2"
BIN="$BUILD/longctx"
. "$(dirname "$0")/cli_lib.sh"
export OMPI_MCA_rmaps_base_oversubscribe=1
declare -A want=(
  [1]="ldd of the bundled binaries|test_cuda|train tiny fp32, 3 steps, private vs cpu|train tiny bf16, 3 steps, private vs cpu|compute-sanitizer memcheck|stage 1 done"
  [2]="ldd of the bundled binaries|attention 128 256 (longctx, private)|PyTorch SDPA flash|1B-shaped model|longctx tiny S 128 bf16|stage 2 done"
  [3]="offload-optimizer tiny fp32 zero 0|offload-optimizer tiny bf16 zero 3|2 ranks on one device: --cp 2|2 ranks on one device: --hp 2 --zero 3|stalled rank|compute-sanitizer racecheck|stage 3 done"
)
declare -A budget=([1]=60 [2]=60 [3]=90)
for s in 1 2 3; do
  mkdir -p "$TMP/out$s"
  t0=$(date +%s)
  OUT="$TMP/out$s" timeout 200 bash "$SRC/tools/gpu_check.sh" --dry-run $s "$BUILD" >"$TMP/stdout$s" 2>"$TMP/stderr$s"
  rc=$?
  el=$(($(date +%s) - t0))
  [ $rc -eq 0 ] && ok || bad "stage $s: rc $rc: $(grep -E ' (FAIL) ' "$TMP/stdout$s") $(tail -3 "$TMP/stderr$s")"
  [ $el -le $((budget[$s] + 5)) ] && ok || bad "stage $s took $el s, over its budget of ${budget[$s]} s"
  IFS='|' read -ra names <<<"${want[$s]}"
  for n in "${names[@]}"; do
    grep -qF -- "$n" "$TMP/stdout$s" && grep -qF -- "$n" "$TMP/out$s/gpu-check-stage$s-rows.txt" && ok || bad "stage $s: no row '$n' on stdout and in the rows file: $(cat "$TMP/stdout$s")"
  done
  # each row carries its time since the stage began, nondecreasing: printed as it came
  awk '{for (i = 2; i <= NF; i++) if ($i ~ /^[0-9]+s$/) {t = $i + 0; if (t < last) bad = 1; last = t; break}} END {exit bad}' "$TMP/stdout$s" && ok || bad "stage $s: row times out of order"
  files=$(ls "$TMP/out$s" | wc -l)
  [ "$files" -eq 2 ] && tar -tzf "$TMP/out$s/gpu-check-stage$s-logs.tar.gz" | grep -q "logs-stage$s/" && ok || bad "stage $s: $files files in OUT, want the rows and one tarball: $(ls "$TMP/out$s")"
done
# the train rows compared something: a loss difference was printed, not 99 (a missing step)
grep -q "worst relative loss difference [0-9.e+-]* (bound" "$TMP/stdout1" && ! grep -q "difference 99 " "$TMP/stdout1" && ok || bad "stage 1 train rows: $(grep train "$TMP/stdout1")"
# a budget cut to 12 s: stage 3 stops within it (+ the 5 s kill grace), says what it did not run, fails
mkdir -p "$TMP/cut"
t0=$(date +%s)
GPU_CHECK_BUDGET=12 OUT="$TMP/cut" timeout 100 bash "$SRC/tools/gpu_check.sh" --dry-run 3 "$BUILD" >"$TMP/cutout" 2>&1
rc=$?
el=$(($(date +%s) - t0))
[ $rc -ne 0 ] && [ $el -le 20 ] && grep -qE "timed out|skip .*not started: budget spent" "$TMP/cutout" && grep -qE "stage 3 done .*([1-9][0-9]* failed rows|[1-9][0-9]* not started)" "$TMP/cutout" && [ -s "$TMP/cut/gpu-check-stage3-logs.tar.gz" ] && ok || bad "a 12 s budget: rc $rc after $el s: $(cat "$TMP/cutout")"
# bad usage: one line, rc 2
bash "$SRC/tools/gpu_check.sh" 4 >"$TMP/o" 2>&1; rc=$?
[ $rc -eq 2 ] && grep -q "usage" "$TMP/o" && ok || bad "stage 4: rc $rc $(cat "$TMP/o")"
finish gpu_check_dry
