#!/usr/bin/env bash
# The layer rule of DESIGN.md ("Layers of the code"): a file under src/ includes only headers
# of its own folder's row or the rows below it. Rows, bottom up: core; comm; backend, io;
# attn, tok; model; plan, train; cli. A backend's own folder (src/backend/NAME/) is part of
# the backend row. Prints each include that points up and exits 1 if there is any.
#   usage: tests/check_layers.sh [SRC_DIR]
set -u
src=${1:-$(cd "$(dirname "$0")/../src" && pwd)}
rank() {
  case $1 in
    core) echo 0 ;;
    comm) echo 1 ;;
    backend | io) echo 2 ;;
    attn | tok) echo 3 ;;
    model) echo 4 ;;
    plan | train) echo 5 ;;
    cli) echo 6 ;;
    *) echo -1 ;;
  esac
}
bad=0 n=0
while IFS= read -r f; do
  rel=${f#"$src"/}
  top=${rel%%/*}
  r=$(rank "$top")
  if [ "$r" -lt 0 ]; then
    echo "check_layers: $rel: folder src/$top is in no row of DESIGN.md's table (add it there and here)"
    bad=$((bad + 1))
    continue
  fi
  while IFS= read -r inc; do
    n=$((n + 1))
    itop=${inc%%/*}
    [ "$itop" = "$inc" ] && continue # a header beside the file
    ir=$(rank "$itop")
    [ "$ir" -lt 0 ] && continue # not a folder of src/ (a system header in quotes)
    if [ "$ir" -gt "$r" ]; then
      echo "check_layers: src/$rel includes \"$inc\": src/$itop is above src/$top in the layer order"
      bad=$((bad + 1))
    fi
  done < <(sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f")
done < <(find "$src" -type f \( -name '*.c' -o -name '*.h' -o -name '*.cu' -o -name '*.cuh' \) | sort)
if [ "$bad" -gt 0 ]; then
  echo "check_layers: $bad include(s) point up"
  exit 1
fi
echo "check_layers: $n includes, none points up"
