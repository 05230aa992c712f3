#!/usr/bin/env bash
# The two structure checks that scripts/test.sh runs fail on a deliberate violation, and pass on the fixed tree:
#   - scripts/check_layers.py: a lower layer including a higher one, a public header including a private one, and
#     a file outside every component;
#   - scripts/function_lengths.py: a function of 81 lines, unless the line before it says why ("// Long:").
# Each runs on a small tree made here (--root), never on the checkout.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failed=0
expect() {  # expect NAME WANTED_STATUS PATTERN CMD...: CMD exits WANTED_STATUS and prints PATTERN
  local name=$1 wanted=$2 pattern=$3 out status
  shift 3
  out=$("$@" 2>&1) && status=0 || status=$?
  if [ "$status" -eq "$wanted" ] && grep -qE "$pattern" <<<"$out"; then
    echo "ok - $name"
  else
    echo "FAIL - $name: exit $status (wanted $wanted), output:"
    echo "$out"
    failed=1
  fi
}

# Layers: util (1) includes core (5); a public header includes a private one; a directory of no component.
t=$tmp/layers
mkdir -p "$t/src/base" "$t/src/util" "$t/src/core" "$t/include/datavo" "$t/cli" "$t/python/src"
echo '#pragma once' >"$t/src/core/hierarchy_impl.hpp"
echo '#include "core/hierarchy_impl.hpp"' >"$t/src/util/fs.cpp"
echo '#pragma once' >"$t/src/base/result_impl.hpp"
echo '#include "base/result_impl.hpp"' >"$t/include/datavo/result.hpp"
layers=(python3 "$root/scripts/check_layers.py" --root "$t")
expect "layers: util including core fails, naming the file and line" 1 \
  'src/util/fs.cpp:1: util \(layer 1\) includes src/core/hierarchy_impl.hpp of the higher layer core' "${layers[@]}"
expect "layers: a public header including a private one fails" 1 \
  'include/datavo/result.hpp:1: a public header includes the private src/base/result_impl.hpp' "${layers[@]}"
mkdir -p "$t/src/stray" && echo '' >"$t/src/stray/x.cpp"
expect "layers: a file of no component fails" 1 'src/stray/x.cpp:1: belongs to no component' "${layers[@]}"
rm -rf "$t/src/stray" && echo '#include "base/result_impl.hpp"' >"$t/src/util/fs.cpp" && echo '' >"$t/include/datavo/result.hpp"
expect "layers: once fixed, the tree passes" 0 '0 include\(s\) that do not look down' "${layers[@]}"

# Function lengths: 81 lines fail, 80 pass, 81 with a reason pass.
f=$tmp/lengths
mkdir -p "$f/src"
body() {  # body NAME LINES: a C++ function of exactly LINES lines
  echo "int $1() {"
  for ((i = 0; i < $2 - 3; i++)); do echo "  int v$i = $i; (void)v$i;"; done
  echo "  return 0;"
  echo "}"
}
{ body long_one 81; body fine_one 80; } >"$f/src/a.cpp"
lengths=(python3 "$root/scripts/function_lengths.py" --root "$f" src)
expect "lengths: a function of 81 lines fails, named with its file and line" 1 \
  '81  src/a.cpp:1  long_one  OVER THE LIMIT' "${lengths[@]}"
expect "lengths: 80 lines is within the limit" 1 '1 over 80 lines without a reason' "${lengths[@]}"
{ echo "// Long: a table that reads best in one place."; body long_one 81; body fine_one 80; } >"$f/src/a.cpp"
expect "lengths: with a reason on the line before, it is listed and passes" 0 \
  'long_one  \(over the limit; says why\)' "${lengths[@]}"

# And the real tree, which scripts/test.sh checks too.
expect "layers: this checkout" 0 '0 include\(s\) that do not look down' python3 "$root/scripts/check_layers.py"
exit "$failed"
