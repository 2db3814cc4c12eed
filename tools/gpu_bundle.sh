#!/usr/bin/env bash
# Packs what tools/gpu_check.sh needs on a GPU machine that has the driver (and the CUDA
# toolkit or a cuBLAS wheel) but not OpenBLAS, oneDNN, cJSON or Open MPI: longctx, test_cuda
# and bench_cuda_attn of a portable CUDA build, stripped; every shared library they load that
# such a machine lacks (ldd, less the C runtime and CUDA's own); Open MPI's mpirun, orted,
# plugins and help files; env.sh (sourced: the bundle's libraries, the machine's cuBLASLt
# directory and the relocated Open MPI on the paths) and run (env.sh, then the command).
# Into gpu-bundle.tar.xz, under 36 MiB (the device tool carries 64 MiB in all).
#
# Portable: the tree is configured with -DLC_NATIVE=OFF (no -march=native: the binaries must
# start on whatever CPU the GPU server has; the kernel table's variants are compiled for their
# own instruction sets anyway and picked by the CPU at run time). cuBLASLt is not inside
# (libcublasLt.so.13 alone is ~520 MiB): env.sh finds the machine's (CUDA_HOME, /usr/local/cuda*,
# a pip nvidia-cublas wheel, ldconfig) and gpu_check.sh's ldd check stops at once without it.
#   tools/gpu_bundle.sh [build-dir]      (default build-bundle: configured and built here if needed)
set -euo pipefail
cd "$(dirname "$0")/.."
B="${1:-build-bundle}"
if [ ! -f "$B/CMakeCache.txt" ]; then
  cmake -S . -B "$B" -DCMAKE_BUILD_TYPE=Release -DLC_NATIVE=OFF -DLC_CUDA=on >/dev/null
fi
grep -q '^LC_NATIVE:BOOL=OFF' "$B/CMakeCache.txt" ||
  { echo "gpu_bundle: $B is built with -march=native (LC_NATIVE=ON): configure a tree with -DLC_NATIVE=OFF -DLC_CUDA=on" >&2; exit 1; }
grep -q '^LC_HAVE_CUDA' "$B/CMakeCache.txt" 2>/dev/null || grep -q 'CMAKE_CUDA_COMPILER:.*nvcc' "$B/CMakeCache.txt" ||
  { echo "gpu_bundle: $B has no CUDA backend: build on a machine with nvcc (-DLC_CUDA=on)" >&2; exit 1; }
nice -n 5 cmake --build "$B" -j2 --target longctx test_cuda bench_cuda_attn >/dev/null
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
G="$T/gpu-bundle"
mkdir -p "$G/bin" "$G/lib"
cp "$B/longctx" "$B/test_cuda" "$B/bench_cuda_attn" "$G/bin/"
# libraries: everything ldd resolves except the C runtime (the machine's own) and CUDA's
skip='/(libc|libm|libdl|libpthread|librt|ld-linux[^/]*|libstdc\+\+|libgcc_s|libcuda|libcudart|libcublas[^/]*|libnvidia[^/]*)\.so'
libs_of() { ldd "$@" 2>/dev/null | awk '/=> \//{print $3}' | sort -u | grep -Ev "$skip" || true; }
for lib in $(libs_of "$G"/bin/*); do cp -L "$lib" "$G/lib/"; done
# Open MPI laid out as one prefix (OPAL_PREFIX and friends point there): mpirun (orterun),
# orted, the plugins, their help files
OMPI=/usr/lib/x86_64-linux-gnu/openmpi
if [ -d "$OMPI" ] && [ -x /usr/bin/orterun ]; then
  mkdir -p "$G/ompi/bin" "$G/ompi/lib" "$G/ompi/share"
  cp -L /usr/bin/orterun "$G/ompi/bin/mpirun"
  cp -L /usr/bin/orted "$G/ompi/bin/"
  cp -rL "$OMPI/lib/openmpi3" "$G/ompi/lib/"
  cp -rL /usr/share/openmpi "$G/ompi/share/"
  [ -d /usr/lib/x86_64-linux-gnu/pmix2 ] && cp -rL /usr/lib/x86_64-linux-gnu/pmix2 "$G/ompi/pmix2"
  # their libraries and the plugins'
  for lib in $(libs_of "$G/ompi/bin/mpirun" "$G/ompi/bin/orted" $(find "$G/ompi" -name '*.so')); do
    [ -e "$G/lib/$(basename "$lib")" ] || cp -L "$lib" "$G/lib/"
  done
else
  echo "gpu_bundle: no Open MPI here: the bundle has no mpirun (gpu_check.sh stage 3 says it needs one)" >&2
fi
find "$G" -type f \( -name '*.so*' -o -perm -u+x \) -exec strip --strip-unneeded {} + 2>/dev/null || true
cat >"$G/env.sh" <<'ENV'
# Sourced (bash): the bundle's libraries, the machine's cuBLASLt and the bundle's Open MPI.
G=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CUDA_LIB=
for d in ${CUDA_HOME:+"$CUDA_HOME/lib64"} /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda-13*/lib64 \
         /usr/local/cuda-13*/targets/*/lib; do
  if [ -e "$d/libcublasLt.so.13" ]; then CUDA_LIB=$d; break; fi
done
if [ -z "$CUDA_LIB" ]; then # a pip wheel (nvidia-cublas), as PyTorch installs it
  d=$(python3 -c 'import nvidia.cublas, os; print(os.path.join(list(nvidia.cublas.__path__)[0], "lib"))' 2>/dev/null || true)
  [ -n "$d" ] && [ -e "$d/libcublasLt.so.13" ] && CUDA_LIB=$d
fi
if [ -z "$CUDA_LIB" ]; then
  d=$(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so\.13 /{print $NF; exit}')
  [ -n "$d" ] && CUDA_LIB=$(dirname "$d")
fi
export LD_LIBRARY_PATH="$G/lib${CUDA_LIB:+:$CUDA_LIB}${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
if [ -d "$G/ompi" ]; then
  export OPAL_PREFIX="$G/ompi" OPAL_BINDIR="$G/ompi/bin" OPAL_LIBDIR="$G/ompi/lib" OPAL_PKGLIBDIR="$G/ompi/lib/openmpi3"
  export OPAL_DATADIR="$G/ompi/share" OPAL_PKGDATADIR="$G/ompi/share/openmpi" PATH="$G/ompi/bin:$PATH"
  export PMIX_MCA_mca_base_component_path="$G/ompi/pmix2/lib/pmix" OMPI_MCA_mca_base_component_path="$G/ompi/lib/openmpi3"
  export PMIX_INSTALL_PREFIX="$G/ompi/pmix2"
fi
ENV
cat >"$G/run" <<'RUN'
#!/usr/bin/env bash
# run CMD ARGS...: CMD with the bundle's paths (env.sh)
. "$(dirname "$0")/env.sh"
exec "$@"
RUN
chmod +x "$G/run"
# Every library the binaries load resolves inside the bundle, to the C runtime or to CUDA's
bad=$(
  . "$G/env.sh"
  for f in "$G"/bin/* "$G"/ompi/bin/*; do ldd "$f" 2>&1 | sed "s|^|$(basename "$f"): |"; done |
    awk -v g="$G/" '/not found/ {print; next} /=> \// {if (index($4, g) != 1) print}' | grep -Ev "$skip" || true
)
[ -z "$bad" ] || { echo "gpu_bundle: libraries resolved outside the bundle and the system's C runtime and CUDA:" >&2; echo "$bad" >&2; exit 1; }
XZ_OPT=-9T0 tar -C "$T" -cJf gpu-bundle.tar.xz gpu-bundle
size=$(stat -c %s gpu-bundle.tar.xz)
echo "gpu-bundle.tar.xz: $size bytes ($(awk -v s="$size" 'BEGIN {printf "%.1f", s / 1048576}') MiB; unpacked $(du -sh "$G" | cut -f1)), $(ls "$G/lib" | wc -l) libraries, mpirun $([ -x "$G/ompi/bin/mpirun" ] && echo included || echo MISSING)"
[ "$size" -lt $((36 << 20)) ] || { echo "gpu_bundle: $size bytes, over 36 MiB" >&2; exit 1; }
