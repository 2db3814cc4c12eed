#!/usr/bin/env bash
# Packs what tools/gpu_check.sh needs on a GPU machine that has the CUDA toolkit and the
# driver but not OpenBLAS, oneDNN, cJSON or Open MPI (our H200 machine): the CUDA build's
# longctx and test_cuda, every shared library they load that such a machine lacks (ldd,
# less the C runtime and CUDA's own), Open MPI's tree (orted, its plugins and help files,
# for the singleton runs of `longctx train`), into gpu-bundle.tar.xz (under the device
# tool's 64 MiB carry; the benchmark's models are made there by bench/torch_gpu_step.py). Run here after `make build`:
#   tools/gpu_bundle.sh [build-dir]    ->  gpu-bundle.tar.xz in the repository root
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:-build}"
for f in "$B/longctx" "$B/test_cuda" "$B/bench_cuda_attn"; do
  [ -x "$f" ] || { echo "gpu_bundle: $f is missing: run make build on a machine with nvcc first" >&2; exit 1; }
done
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
mkdir -p "$T/gpu-bundle/bin" "$T/gpu-bundle/lib"
cp "$B/longctx" "$B/test_cuda" "$B/bench_cuda_attn" "$T/gpu-bundle/bin/"
# libraries: everything ldd resolves except the C runtime (the machine's own) and CUDA's
skip='/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas[^/]*|libnvidia[^/]*)\.so'
for f in "$B/longctx" "$B/test_cuda"; do ldd "$f"; done | awk '/=> \//{print $3}' | sort -u | grep -Ev "$skip" |
  while read -r lib; do cp -L "$lib" "$T/gpu-bundle/lib/"; done
# Open MPI's tree, laid out as one prefix (OPAL_PREFIX and friends point there)
OMPI=/usr/lib/x86_64-linux-gnu/openmpi
if [ -d "$OMPI" ]; then
  mkdir -p "$T/gpu-bundle/ompi/bin" "$T/gpu-bundle/ompi/lib" "$T/gpu-bundle/ompi/share"
  cp -L /usr/bin/orted "$T/gpu-bundle/ompi/bin/" 2>/dev/null || true
  cp -rL "$OMPI/lib/openmpi3" "$T/gpu-bundle/ompi/lib/" 2>/dev/null || true
  cp -rL /usr/share/openmpi "$T/gpu-bundle/ompi/share/" 2>/dev/null || true
  cp -rL /usr/lib/x86_64-linux-gnu/pmix2 "$T/gpu-bundle/ompi/pmix2" 2>/dev/null || true
  # the plugins' own libraries
  find "$T/gpu-bundle/ompi" -name '*.so' -exec ldd {} \; 2>/dev/null | awk '/=> \//{print $3}' | sort -u |
    grep -Ev "$skip" | while read -r lib; do [ -e "$T/gpu-bundle/lib/$(basename "$lib")" ] || cp -L "$lib" "$T/gpu-bundle/lib/"; done
fi
XZ_OPT=-6T0 tar -C "$T" -cJf gpu-bundle.tar.xz gpu-bundle
ls -la gpu-bundle.tar.xz
size=$(stat -c %s gpu-bundle.tar.xz)
[ "$size" -lt $((64 << 20)) ] || { echo "gpu_bundle: $size bytes, over the 64 MiB the device tool carries" >&2; exit 1; }
