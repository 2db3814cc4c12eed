#!/usr/bin/env bash
# Plants each of issue 49's four bugs (and a missing cp.async wait, e) in the CUDA kernels in
# turn, rebuilds test_cuda_emu (the kernels on the CPU emulation of CUDA) and shows that it
# fails, with the check that caught the bug; restores every file afterwards (also on Ctrl-C). A build directory whose tree has
# no CUDA backend (-DLC_CUDA=off) rebuilds only the emulated kernels, not nvcc's objects.
#   usage: tools/emu_planted_bugs.sh [BUILD_DIR]    (default: build-nocuda)
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build-nocuda}
cd "$root" || exit 1
k=src/backend/cuda
saved=$(mktemp -d)
cp $k/cuda_flash_mma.cu $k/cuda_elem.cu "$saved/"
restore() { cp "$saved/cuda_flash_mma.cu" "$saved/cuda_elem.cu" $k/; }
trap 'restore; rm -rf "$saved"' EXIT INT TERM

# name | file | perl substitution (must change the file)
bugs=(
  "a: an A fragment one row group off (ldmatrix rows g+16 instead of g+8)|$k/cuda_flash_mma.cu|s/base \+ \(\(mi & 1\) \* 8 \+ r\) \* ld \+ col0/base + ((mi \& 1) * 16 + r) * ld + col0/"
  "b: the mma forward's barrier before a tile's loads removed|$k/cuda_flash_mma.cu|s/^    __syncthreads\(\); \/\/ the previous tile is no longer read\n//m"
  "c: the causal skip of query blocks one block early (mma dk/dv)|$k/cuda_flash_mma.cu|s/p\.q_start \+ i0 \+ FL_BQ - 1 < kfirst\) break;/p.q_start + i0 + FL_BQ - 1 < kfirst + FL_BK) break;/"
  "e: the mma forward's cp.async.wait_group before a K/V tile is read removed|$k/cuda_flash_mma.cu|s/^    fl_cp_wait<1>\(\); \/\/ this tile.s copies landed[^\n]*\n//m"
  "d: a reduction order changed (the double shuffle tree's offsets reversed)|$k/cuda_elem.cu|s/for \(int off = 16; off > 0; off >>= 1\) v = __dadd_rn/for (int off = 1; off < 32; off <<= 1) v = __dadd_rn/"
)
status=0
for b in "${bugs[@]}"; do
  IFS='|' read -r name file sub <<<"$b"
  restore
  before=$(md5sum "$file")
  perl -0pi -e "$sub" "$file"
  if [ "$(md5sum "$file")" = "$before" ]; then
    echo "PLANT FAILED ($name): the substitution matched nothing"
    status=1
    continue
  fi
  echo "== bug $name"
  git --no-pager diff --stat -- "$file" | head -1
  if ! cmake --build "$build" --target test_cuda_emu -j2 >/dev/null 2>&1; then
    echo "   build failed"
    status=1
    continue
  fi
  out=$("$build/test_cuda_emu" 2>&1)
  rc=$?
  if [ $rc -eq 0 ]; then
    echo "   NOT CAUGHT: test_cuda_emu passed"
    status=1
  else
    echo "   caught (exit $rc): $(echo "$out" | tail -1)"
    # (the lines after the emulation's self-test, whose planted faults are expected)
    echo "$out" | sed -n '/the CUDA kernels against the CPU backend/,$p' | grep -E "^(FAIL|cuda_emu:)" | head -4 |
      cut -c1-260 | sed 's/^/   /'
  fi
done
restore
cmake --build "$build" --target test_cuda_emu -j2 >/dev/null 2>&1
exit $status
