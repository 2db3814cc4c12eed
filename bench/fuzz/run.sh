#!/usr/bin/env bash
# Builds the libFuzzer targets from CMake (a clang tree with LC_FUZZ=ON: the library's own
# objects instrumented, bench/fuzz/fuzz.cmake) and runs every target for SECONDS, one after
# another, on its seed corpus (bench/fuzz/seeds.py: valid files of each kind plus the
# regression inputs of tests/data/fuzz). A crashing input lands in WORKDIR/crash-<target>-*:
# fix the bug, then copy the input to tests/data/fuzz/ under the target's prefix (see
# tests/test_fuzz_regress.c) so test_fuzz_regress keeps it fixed; a tokenizer crasher
# (fuzz_tok) goes to tests/data/tok/fuzz/, which test_tok reads.
#   usage: bench/fuzz/run.sh [--smoke] [SECONDS=60] [WORKDIR=/tmp/longctx_fuzz]
#   --smoke: CI's run (make test): where clang or libFuzzer is missing, say so and exit 0.
#   env: FUZZ_BUILD (build tree, default build-fuzz), JOBS (build jobs), FUZZ_TARGETS (a
#   space-separated subset), FUZZ_ARGS (more libFuzzer flags, e.g. -runs=10000000).
# Needs clang and libFuzzer (Debian: apt-get install -y clang libclang-rt-dev libomp-dev;
# tools/install_deps.sh installs them).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
smoke=0
if [ "${1:-}" = "--smoke" ]; then smoke=1; shift; fi
secs=${1:-60}
work=${2:-/tmp/longctx_fuzz}
build=${FUZZ_BUILD:-$root/build-fuzz}
jobs=${JOBS:-$(nproc)}
CC=${CC:-clang}
case "$CC" in *clang*) ;; *) CC=clang ;; esac

# clang with libFuzzer, ASan and UBSan, and OpenMP (the library is built with it)
probe=$(mktemp -d)
trap 'rm -rf "$probe"' EXIT
printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$probe/p.c"
why=""
if ! command -v "$CC" >/dev/null; then
  why="no $CC (clang) found"
elif ! "$CC" -fsanitize=fuzzer,address,undefined -fopenmp "$probe/p.c" -o "$probe/p" 2>"$probe/log"; then
  why="clang cannot link -fsanitize=fuzzer,address,undefined -fopenmp ($(head -c 300 "$probe/log" | tr '\n' ' '))"
fi
if [ -n "$why" ]; then
  fix="apt-get install -y clang libclang-rt-dev libomp-dev (tools/install_deps.sh)"
  if [ $smoke = 1 ]; then
    echo "fuzz smoke: SKIPPED: $why; install: $fix"
    exit 0
  fi
  echo "run.sh: $why; install: $fix" >&2
  exit 1
fi

t0=$(date +%s)
mkdir -p "$build"
cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$CC" -DLC_FUZZ=ON -DLC_CUDA=off -DCMAKE_BUILD_TYPE=Debug \
  "-DCMAKE_C_FLAGS_DEBUG=-O1 -gline-tables-only" >"$build/fuzz-configure.log" 2>&1 ||
  { cat "$build/fuzz-configure.log" >&2; echo "run.sh: configuring $build failed" >&2; exit 1; }
if ! cmake --build "$build" --target fuzz -j "$jobs" >"$build/fuzz-build.log" 2>&1; then
  grep -E "error|undefined reference" "$build/fuzz-build.log" | head -40 >&2
  echo "run.sh: building the fuzz targets failed (full log: $build/fuzz-build.log)" >&2
  exit 1
fi
t1=$(date +%s)
targets=${FUZZ_TARGETS:-$(cd "$here" && ls fuzz_*.c | sed 's/\.c$//')}
echo "built the fuzz targets in $((t1 - t0)) s ($build)"

mkdir -p "$work"
rm -rf "$work"/corpus_fuzz_* "$work"/crash-fuzz_* "$work"/fuzz_*.log "$work"/fuzz_*.dict
python3 "$here/seeds.py" "$root" "$work"
echo "fuzzing each target for ${secs} s in $work"
rc=0
printf '%-18s %12s %6s %6s %6s %9s  %s\n' target runs s cov ft new_units result
for t in $targets; do
  [ -x "$build/$t" ] || { echo "$t: not built" >&2; rc=1; continue; }
  s0=$(date +%s)
  st=0
  (cd "$work" && "$build/$t" -max_total_time="$secs" -dict="$work/$t.dict" -print_final_stats=1 \
     -artifact_prefix="$work/crash-$t-" ${FUZZ_ARGS:-} "$work/corpus_$t" >"$work/$t.log" 2>&1) || st=$?
  s1=$(date +%s)
  runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/$t.log" | tail -1)
  new=$(sed -n 's/^stat::new_units_added: *//p' "$work/$t.log" | tail -1)
  last=$(grep -E "^#[0-9]+" "$work/$t.log" | tail -1)
  cov=$(sed -n 's/.* cov: \([0-9]*\).*/\1/p' <<<"$last")
  ft=$(sed -n 's/.* ft: \([0-9]*\).*/\1/p' <<<"$last")
  res=ok
  if [ $st != 0 ]; then
    res="FAILED (exit $st; log $work/$t.log)"
    rc=1
    grep -E "ERROR|SUMMARY|runtime error|Test unit written" "$work/$t.log" | head -6 >&2 || true
  fi
  printf '%-18s %12s %6s %6s %6s %9s  %s\n' "$t" "${runs:-?}" $((s1 - s0)) "${cov:-?}" "${ft:-?}" "${new:-?}" "$res"
done
if ls "$work"/crash-* >/dev/null 2>&1; then
  echo "crashing inputs:"
  ls "$work"/crash-*
  rc=1
fi
echo "fuzz run: $( [ $rc = 0 ] && echo passed || echo FAILED ) in $(( $(date +%s) - t0 )) s"
exit $rc
