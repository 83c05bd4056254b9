#!/usr/bin/env bash
# The e2e scripts share one library: every *_test.sh in DIR (default: this folder) sources lib.sh,
# redefines none of its functions and ends with e2e_end. Prints each violation; exit 1 if any.
#   tests/e2e/one_library_check.sh [DIR]
set -euo pipefail
dir=${1:-$(cd "$(dirname "$0")" && pwd)}
names() { grep -oE '^[a-z_][a-z0-9_]*\(\)' "$1" | tr -d '()' | sort -u; }
lib=$(names "$dir/lib.sh")
bad=0 n=0
for f in "$dir"/*_test.sh; do
  n=$((n + 1))
  s=$(basename "$f")
  grep -q 'source "$here/lib.sh"' "$f" || { echo "$s: does not source lib.sh"; bad=1; }
  again=$(comm -12 <(echo "$lib") <(names "$f") | tr '\n' ' ')
  [[ -z $again ]] || { echo "$s: redefines lib.sh functions: $again"; bad=1; }
  grep -qE '^e2e_end( |$)' "$f" || { echo "$s: does not end with e2e_end"; bad=1; }
done
((n > 0)) || { echo "no *_test.sh in $dir"; exit 1; }
((bad == 0)) && echo "one e2e library: $n scripts source lib.sh, redefine none of it, end with e2e_end"
exit "$bad"
