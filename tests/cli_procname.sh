#!/usr/bin/env bash
# The process keeps its name when longctx re-executes itself for OpenBLAS's core type
# (cli/blas_env.c; LONGCTX_TEST_REEXEC=1 forces the re-execution on any CPU): under mpirun
# every rank is "longctx" in /proc/PID/comm (what ps, top and pkill show), not "exe", with
# argv[0] as given and the re-execution done (LONGCTX_ENV_REEXEC in its environment).
#   usage: tests/cli_procname.sh LONGCTX
BIN=$(readlink -f "$1")
source "$(dirname "$0")/cli_lib.sh"
name=$(basename "$BIN")
LONGCTX_TEST_REEXEC=1 timeout 120 $MPI -np 2 "$BIN" train --model tiny --seq 64 --batch 2 --steps 100000 --threads 1 \
  --timeout 0 --log-every 100000 >"$TMP/out" 2>&1 &
job=$!
ranks=""
for _ in $(seq 200); do # up to 20 s for both ranks to start and re-execute
  ranks=$(pgrep -f -- "$BIN train --model tiny" | while read -r p; do
    [ "$(tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -c '^LONGCTX_ENV_REEXEC=1$')" = 1 ] && echo "$p"
  done)
  [ "$(echo "$ranks" | grep -c .)" -ge 2 ] && break
  sleep 0.1
done
if [ "$(echo "$ranks" | grep -c .)" -ge 2 ]; then
  ok
  for p in $ranks; do
    comm=$(cat "/proc/$p/comm" 2>/dev/null)
    arg0=$(tr '\0' '\n' <"/proc/$p/cmdline" 2>/dev/null | head -1)
    # (comm holds at most 15 characters of the name)
    if [ "$comm" = "${name:0:15}" ]; then ok; else bad "rank pid $p is named '$comm' after the re-execution, not '$name'"; fi
    if [ "$arg0" = "$BIN" ]; then ok; else bad "rank pid $p has argv[0] '$arg0', not '$BIN'"; fi
  done
else
  bad "two re-executed ranks did not appear within 20 s ($(tail -2 "$TMP/out"))"
fi
kill "$job" 2>/dev/null
pkill -f -- "$BIN train --model tiny" 2>/dev/null
wait "$job" 2>/dev/null
finish cli_procname
