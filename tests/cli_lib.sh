# Shared by the CLI test scripts (sourced after `BIN="$1"`): a scratch directory removed
# on exit, pass/fail counters, the mpirun command line and the loss extractor.
MPI="mpirun --allow-run-as-root --oversubscribe"
export OMP_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# "step loss" pairs of a --log-json file.
losses() { grep -o '"step":[0-9]*,"loss":[-0-9.e+]*' "$1" | sed 's/"step":\([0-9]*\),"loss":/\1 /'; }
# The summary line; the exit status is the verdict.
finish() { echo "$1: $pass passed, $fail failed"; [ $fail -eq 0 ]; }
