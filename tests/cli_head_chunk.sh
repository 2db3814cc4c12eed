#!/usr/bin/env bash
# Head-chunked Ulysses (--head-chunk) end to end: on 2 ranks (hp 2) training with chunks
# gives the losses of the unchunked run (bit for bit where each stage holds whole kv groups,
# to fp32 rounding where every stage shares one kv head); auto chunks when the memory cap
# asks for it; bad values are one line and a non-zero exit on every rank; plan names the
# chunk and predicts smaller checkpoint and communication bytes.
set -u
BIN="$1"
. "$(dirname "$0")/cli_lib.sh"
RUN="timeout 120 $MPI -np 2"

# demo: 8 query heads, 4 kv heads: 4 and 2 per rank, so chunk 2 holds whole kv groups. One
# thread per rank: the attention kernel's sums then follow the same order as unchunked.
T="--model demo --seq 256 --steps 3 --hp 2 --threads 1 --lr 3e-3 --warmup 0 --checkpoint selective" # (the policy pinned: auto would trade it for the chunks)
$RUN "$BIN" train $T --log-json "$TMP/all.jsonl" >"$TMP/out" 2>"$TMP/err" && ok || bad "unchunked: $(cat "$TMP/err")"
grep -q "head chunk     all 4 query heads per rank at once" "$TMP/out" && ok || bad "settings table: $(grep -i chunk "$TMP/out")"
$RUN "$BIN" train $T --head-chunk 2 --log-json "$TMP/c2.jsonl" >"$TMP/out" 2>"$TMP/err" && ok || bad "--head-chunk 2: $(cat "$TMP/err")"
grep -q "head chunk     2 of 4 query heads per rank per Ulysses stage (2 stages)" "$TMP/out" && ok || bad "settings table: $(grep -i chunk "$TMP/out")"
[ "$(losses "$TMP/c2.jsonl")" = "$(losses "$TMP/all.jsonl")" ] && [ "$(losses "$TMP/all.jsonl" | wc -l)" = 3 ] && ok ||
  bad "chunk 2 losses $(losses "$TMP/c2.jsonl" | tr '\n' ' ') vs unchunked $(losses "$TMP/all.jsonl" | tr '\n' ' ')"
# The checkpoints of the chunked run are smaller (the LSE alone is kept per layer).
peak_ck() { python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['peak_bytes'])" "$1"; }
[ "$(peak_ck "$TMP/c2.jsonl")" -lt "$(peak_ck "$TMP/all.jsonl")" ] && ok || bad "peak with chunks $(peak_ck "$TMP/c2.jsonl") not below $(peak_ck "$TMP/all.jsonl")"
# auto: without --mem-limit the cap is the node's memory over its ranks: all heads fit; a
# cap between the two runs' peaks picks chunk 2.
$RUN "$BIN" train $T --head-chunk auto --log-json "$TMP/auto.jsonl" >"$TMP/out" 2>"$TMP/err" && ok || bad "auto: $(cat "$TMP/err")"
grep -q "all 4 query heads per rank at once (--head-chunk auto: they fit the memory cap)" "$TMP/out" && ok || bad "auto without a cap: $(grep -i chunk "$TMP/out")"
CAP=$(python3 -c "import sys; print((int(sys.argv[1]) + int(sys.argv[2])) / 2 / 2**30)" "$(peak_ck "$TMP/c2.jsonl")" "$(peak_ck "$TMP/all.jsonl")")
$RUN "$BIN" train $T --head-chunk auto --mem-limit "$CAP" --log-json "$TMP/autoc.jsonl" >"$TMP/out" 2>"$TMP/err" && ok || bad "auto under a cap: $(cat "$TMP/err")"
grep -q "2 of 4 query heads per rank per Ulysses stage (2 stages, --head-chunk auto" "$TMP/out" && ok || bad "auto under $CAP GiB: $(grep -i chunk "$TMP/out")"
[ "$(losses "$TMP/autoc.jsonl")" = "$(losses "$TMP/all.jsonl")" ] && ok || bad "auto losses differ"

# tiny: 4 query heads, 2 kv heads: one kv head per rank, shared by the stages of chunk 1; its
# gradient is summed over the stages (fp32 rounding): losses within 1e-6 relative.
T1="--model tiny --seq 128 --steps 3 --hp 2 --threads 1 --lr 3e-3 --warmup 0"
$RUN "$BIN" train $T1 --log-json "$TMP/t0.jsonl" >/dev/null 2>"$TMP/err" && ok || bad "tiny: $(cat "$TMP/err")"
$RUN "$BIN" train $T1 --head-chunk 1 --log-json "$TMP/t1.jsonl" >/dev/null 2>"$TMP/err" && ok || bad "tiny chunk 1: $(cat "$TMP/err")"
python3 - "$TMP/t0.jsonl" "$TMP/t1.jsonl" <<'PY' && ok || bad "tiny chunk 1 losses: $(losses "$TMP/t1.jsonl" | tr '\n' ' ') vs $(losses "$TMP/t0.jsonl" | tr '\n' ' ')"
import json, sys
a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:3])
sys.exit(0 if len(a) == len(b) == 3 and a[0] == b[0] and all(abs(x - y) <= 1e-6 * abs(x) for x, y in zip(a, b)) else 1)
PY

# Bad values: one line (from rank 0) and a non-zero exit on every rank.
bad_value() { # expected-substring args...
  local w="$1"; shift
  rm -f "$TMP"/rc.* "$TMP"/err.*
  $RUN sh -c '"$0" train "$@" >/dev/null 2>"'"$TMP"'/err.$OMPI_COMM_WORLD_RANK"; echo $? >"'"$TMP"'/rc.$OMPI_COMM_WORLD_RANK"' \
    "$BIN" "$@" >/dev/null 2>&1
  local lines=$(cat "$TMP"/err.* 2>/dev/null | wc -l)
  if [ -s "$TMP/rc.0" ] && [ -s "$TMP/rc.1" ] && [ "$(cat "$TMP/rc.0")" != 0 ] && [ "$(cat "$TMP/rc.1")" != 0 ] &&
     [ "$lines" = 1 ] && grep -q -- "$w" "$TMP/err.0"; then ok
  else bad "'$*': exit codes $(cat "$TMP"/rc.* 2>/dev/null | tr '\n' ' '), stderr: $(cat "$TMP"/err.* 2>/dev/null) (wanted '$w')"; fi
}
bad_value "--head-chunk 1: each rank holds 4 query heads (8 / hp 2), and a chunk must hold whole groups of query heads sharing a kv head; valid: 2, 4 (or all, auto)" $T --head-chunk 1
bad_value "--head-chunk 3: each rank holds 4 query heads" $T --head-chunk 3
bad_value "--head-chunk 'two': give query heads per rank per stage" $T --head-chunk two
bad_value "--head-chunk 2 needs head parallelism (--hp > 1)" --model demo --seq 256 --steps 1 --cp 2 --head-chunk 2
expect_error "--head-chunk 2 needs head parallelism" train --model tiny --seq 64 --steps 1 --head-chunk 2
expect_error "--head-chunk '0'" train --model tiny --seq 64 --steps 1 --hp 1 --head-chunk 0
expect_error "valid: 1, 2, 4 (or all, auto)" plan --model llama-3-8b --seq 1M --hp 8 --cp 8 --head-chunk 3

# plan: the chunk in use and smaller checkpoint and communication bytes per local token.
P="plan --model llama-3-8b --seq 1M --hp 8 --cp 8 --zero 3 --precision bf16"
per_tok() { awk -F'|' -v c="$2" '$2 ~ c {gsub(/ /, "", $4); print $4}' "$1"; }
"$BIN" $P >"$TMP/p0" 2>&1 && "$BIN" $P --head-chunk 1 >"$TMP/p1" 2>&1 && ok || bad "plan: $(cat "$TMP/p1")"
grep -q "^  attention  Ulysses head chunk: all 4 query heads per rank at once" "$TMP/p0" && ok || bad "plan without chunks: $(grep attention "$TMP/p0")"
grep -q "^  attention  Ulysses head chunk 1 of 4 query heads per rank (4 stages): 2.0 MiB kept per layer" "$TMP/p1" && ok || bad "plan --head-chunk 1: $(grep attention "$TMP/p1")"
for c in checkpoints comm; do
  [ "$(per_tok "$TMP/p1" " $c ")" -lt "$(per_tok "$TMP/p0" " $c ")" ] && ok || bad "plan $c per token: $(per_tok "$TMP/p1" " $c ") vs $(per_tok "$TMP/p0" " $c ")"
done
# auto against --budget-gib: all heads do not fit 20 GiB at 1M, chunk 2 does; the largest-S
# search tries every chunk and names the one it uses.
"$BIN" $P --head-chunk auto >"$TMP/pa" 2>&1 && grep -q "Ulysses head chunk 2 of 4 query heads per rank (2 stages, auto" "$TMP/pa" && ok || bad "plan auto: $(grep attention "$TMP/pa")"
grep -q "^Largest S within 20.00 GiB per rank: .*; head chunk 1 of 4)" "$TMP/pa" && ok || bad "plan auto largest S: $(grep Largest "$TMP/pa")"
"$BIN" $P >"$TMP/p0" && grep -q "^Largest S within 20.00 GiB per rank: .*; head chunk 4 of 4)" "$TMP/p0" && ok || bad "plan largest S: $(grep Largest "$TMP/p0")"
finish cli_head_chunk
