#!/usr/bin/env bash
# Installs the Debian packages longctx builds with, if any is missing (clang, its runtime
# libraries and libomp: the fuzz targets' tree, bench/fuzz/run.sh).
set -e
PKGS="build-essential cmake libopenblas-openmp-dev libopenmpi-dev openmpi-bin libcjson-dev libdnnl-dev zlib1g-dev clang libclang-rt-dev libomp-dev"
missing=""
for p in $PKGS; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
echo "installing:$missing"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
