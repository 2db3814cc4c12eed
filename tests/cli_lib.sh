# Shared by the CLI test scripts (sourced after `BIN="$1"`): a scratch directory removed
# on exit, pass/fail counters, the mpirun command line and the loss extractor.
MPI="mpirun --allow-run-as-root --oversubscribe"
export OMP_NUM_THREADS=1
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
# An empty home of its own: calibrate notes the last machine file it wrote under
# ~/.cache/longctx, which a test must not leave in the user's cache (nor read from it).
mkdir -p "$TMP/.lib-home"
export HOME="$TMP/.lib-home" XDG_CACHE_HOME=
pass=0 fail=0
ok() { pass=$((pass + 1)); }
bad() { fail=$((fail + 1)); echo "FAIL: $*" >&2; }
# "step loss" pairs of a --log-json file.
losses() { grep -o '"step":[0-9]*,"loss":[-0-9.e+]*' "$1" | sed 's/"step":\([0-9]*\),"loss":/\1 /'; }
# Bad input: a non-zero exit and at most two lines on stderr holding the expected words.
expect_error() { # expected-substring args...
  local w="$1"; shift
  "$BIN" "$@" >"$TMP/out" 2>"$TMP/err"
  local rc=$?
  if [ $rc -ne 0 ] && grep -q -- "$w" "$TMP/err" && [ "$(wc -l <"$TMP/err")" -le 2 ]; then ok
  else bad "'$*': rc=$rc, stderr: $(cat "$TMP/err") (wanted '$w')"; fi
}
# The summary line; the exit status is the verdict.
finish() { echo "$1: $pass passed, $fail failed"; [ $fail -eq 0 ]; }
