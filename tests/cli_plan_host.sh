#!/usr/bin/env bash
# plan --offload-optimizer's host side (issue 49): the host bytes per rank and per node that
# plan prints (plain, --auto, --longest) against an independent count from Llama-3-8B's
# shapes (fp32 master weights, gradients and AdamW m and v, sharded by ZeRO as the store
# does, plus one unit's landing buffer), and layouts whose host bytes exceed the node's host
# memory (--host-mem-gib, a --hardware file's host_memory_per_node_gib) dropped with a line.
set -u
BIN="$1"
SRC="$2"
. "$(dirname "$0")/cli_lib.sh"
H100="$SRC/hardware/h100-sxm-80gb-8x-node.json"
GIB=1073741824

# Llama-3-8B (meta-llama/Meta-Llama-3-8B config.json): V 128256, d 4096, 32 layers, ffn
# 14336, 32 query heads and 8 key/value heads of 128, untied head. Counted here, not by the program.
read -r NP LAND <<<"$(python3 -c '
V, d, L, f, kv = 128256, 4096, 32, 14336, 8 * 128
layer = d * d * 2 + d * kv * 2 + 3 * d * f + 2 * d  # q, o; k, v; gate, up, down; two norms
np_ = V * d + L * layer + d + V * d                  # embedding, layers, final norm, head
print(np_, 4 * (V * d + d))                          # the largest unit (final norm + head), fp32
')"
[ "$NP" = 8030261248 ] && ok || bad "independent parameter count $NP, want 8030261248 (Llama-3-8B)"
NORM=8 # the gradient norm's fp64 accumulator (LC_PS_NORM_ACC_BYTES)

host_line() { grep -o 'Host memory (--offload-optimizer): [0-9]* bytes per rank, [0-9]* bytes per node ([0-9]* rank' "$1"; }

# 1. one rank, ZeRO 0, fp32: 4 + 4 + 8 bytes per parameter, one unit's landing buffer.
"$BIN" plan --model llama-3-8b --seq 8K --offload-optimizer --hardware "$H100" --precision fp32 >"$TMP/out" 2>"$TMP/err" && ok || bad "plan: $(cat "$TMP/err")"
want=$((16 * NP + LAND + NORM))
read -r r n k <<<"$(host_line "$TMP/out" | awk '{print $4, $8, $12}' | tr -d '(')"
[ "${r:-}" = "$want" ] && [ "${n:-}" = "$want" ] && [ "${k:-}" = 1 ] && ok || bad "zero 0: host per rank ${r:-?} per node ${n:-?} (${k:-?} ranks), want $want on 1 rank: $(cat "$TMP/out" | grep -i host)"
grep -q "Host memory .*2048.00 GiB: the --hardware file's host_memory_per_node_gib): fits" "$TMP/out" && ok || bad "the H100 node's 2 TiB host memory: $(grep 'Host memory' "$TMP/out")"

# 2. 8 ranks on one node, ZeRO 1 in groups of 8: params and grads whole, m and v 8 ways;
# per node 8 x per rank. (Units are padded to a multiple of the group: up to 7 elements per
# unit per array, 34 units x 7 x 16 bytes at most; Llama-3-8B's units divide evenly.)
"$BIN" plan --model llama-3-8b --seq 8K --offload-optimizer --hardware "$H100" --precision fp32 --gpus 8 --zero 1 >"$TMP/out" 2>"$TMP/err" && ok || bad "plan zero 1: $(cat "$TMP/err")"
want=$((8 * NP + 8 * NP / 8 + LAND + NORM))
read -r r n k <<<"$(host_line "$TMP/out" | awk '{print $4, $8, $12}' | tr -d '(')"
d=$(( ${r:-0} - want )); d=${d#-}
[ "$d" -le 3808 ] && [ "${n:-}" = $(( ${r:-0} * 8 )) ] && [ "${k:-}" = 8 ] && ok || bad "zero 1 on 8: host per rank ${r:-?} per node ${n:-?} (${k:-?}), want $want and 8x"

# 3. --longest --auto on one H100: the layout's host bytes next to its device peak
# (per rank = per node on one rank; at least the 16 bytes per parameter held all step).
"$BIN" plan --model llama-3-8b --longest --auto --offload-optimizer --hardware "$H100" --gpus 1 >"$TMP/out" 2>"$TMP/err" && ok || bad "plan --longest --auto: $(cat "$TMP/err")"
lines=$(grep -c "host memory (--offload-optimizer's model states): .* GiB per rank, .* GiB per node (1 rank; [0-9]* and [0-9]* bytes) of 2048.00 GiB" "$TMP/out")
[ "$lines" -ge 2 ] && ok || bad "--longest --auto should print the host line under the longest command and each layout: $(grep -i host "$TMP/out")"
hb=$(grep -o "(1 rank; [0-9]* and" "$TMP/out" | head -1 | awk '{print $3}')
[ -n "$hb" ] && [ "$hb" -ge $((16 * NP)) ] && [ "$hb" -le $((16 * NP + 3 * LAND)) ] && ok || bad "--longest host bytes ${hb:-?} outside [16 x params, + 3 units]"

# 4. a node with 64 GiB of host memory: every layout of one rank needs ~120 GiB: dropped.
"$BIN" plan --model llama-3-8b --longest --auto --offload-optimizer --hardware "$H100" --gpus 1 --host-mem-gib 64 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && grep -q "Longest S: none fits: [0-9]* layouts\? fitting the device dropped: their model states in host memory (--offload-optimizer) need at least 1[12][0-9].[0-9]* GiB per node .* over the node's 64.00 GiB (--host-mem-gib)" "$TMP/out" && ! grep -q "longctx train" "$TMP/out" && ok || bad "64 GiB of host: rc=$rc: $(cat "$TMP/out")"

# 5. --auto on 8 ranks with 600 GiB per node: ZeRO 0 (8 x ~122 GiB) dropped, ZeRO >= 1 kept;
# every printed layout's host bytes per node within the 600 GiB.
"$BIN" plan --model llama-3-8b --seq 32K --auto --top 20 --offload-optimizer --hardware "$H100" --gpus 8 --host-mem-gib 600 >"$TMP/out" 2>"$TMP/err" && ok || bad "--auto 600 GiB: $(cat "$TMP/err")"
grep -q "layouts fitting the device dropped: .* over the node's 600.00 GiB (--host-mem-gib)" "$TMP/out" && ok || bad "--auto should say which layouts the host memory dropped: $(grep -i 'dropped\|fit in' "$TMP/out")"
over=$(grep -o "(8 ranks; [0-9]* and [0-9]* bytes)" "$TMP/out" | awk -v cap=$((600 * GIB)) '{n++; if ($5 + 0 > cap) bad++} END {print n + 0, bad + 0}')
[ "${over% *}" -ge 1 ] && [ "${over#* }" = 0 ] && ok || bad "printed layouts (count, over 600 GiB): $over"
! grep -q "^| [0-9]* | .* | 0 | " "$TMP/out" && ok || bad "a ZeRO 0 layout (8 x 122 GiB of host) was kept: $(grep '^| [0-9]' "$TMP/out")"

# 6. a hardware file's host memory is read (here 100 GiB per node): the same drop.
python3 - "$H100" "$TMP/small.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["host_memory_per_node_gib"] = 100
json.dump(d, open(sys.argv[2], "w"))
PY
"$BIN" plan --model llama-3-8b --longest --offload-optimizer --hardware "$TMP/small.json" --gpus 1 >"$TMP/out" 2>"$TMP/err"
rc=$?
[ $rc -eq 1 ] && grep -q "over the node's 100.00 GiB (the --hardware file's host_memory_per_node_gib)" "$TMP/out" && ok || bad "hardware file's 100 GiB host: rc=$rc $(cat "$TMP/out" "$TMP/err")"
"$BIN" plan --model llama-3-8b --seq 8K --offload-optimizer --hardware "$TMP/small.json" >"$TMP/out" 2>&1
grep -q "Host memory .*100.00 GiB: the --hardware file's host_memory_per_node_gib): does NOT fit" "$TMP/out" && ok || bad "plain plan over the host memory: $(grep 'Host memory' "$TMP/out")"
python3 - "$H100" "$TMP/neg.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1])); d["host_memory_per_node_gib"] = -5
json.dump(d, open(sys.argv[2], "w"))
PY
expect_error "host_memory_per_node_gib\" must be a positive number" plan --model llama-3-8b --seq 8K --hardware "$TMP/neg.json"

# 7. bad flags: one line each.
expect_error "add --offload-optimizer" plan --model llama-3-8b --seq 8K --host-mem-gib 64
expect_error "give the host memory per node in GiB" plan --model llama-3-8b --seq 8K --offload-optimizer --host-mem-gib 0
finish cli_plan_host
