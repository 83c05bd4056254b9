# Shell helpers shared by the simulator scripts in bench/ (sourced, not run).

# metric FILE POLICY KEY: a number from the pretty-printed (indent 2) JSON of nvl72-sim --json.
metric() {
  awk -v want="$2" -v key="\"$3\":" '
    /^    "[^"]+": \{$/ { cur = $1; gsub(/[":]/, "", cur) }
    cur == want && $1 == key { v = $2; gsub(/,/, "", v); print v; exit }
  ' "$1"
}
