#!/usr/bin/env bash
# One job writing 1 GiB until settled, through two jobs-host binaries, and
# `head -c 1G /dev/zero | cat > /dev/null`, in every round; the order of the
# three turns each round, so none always runs on a machine warmed by another.
# Usage: benches/one_gib_ab.sh BEFORE_BIN AFTER_BIN [ROUNDS]
# Prints seconds per side and round; read the medians and the best.
set -euo pipefail
before=$1
after=$2
rounds=${3:-12}
script=$(mktemp)
trap 'rm -f "$script"' EXIT
printf 'bash head -c 1073741824 /dev/zero\nsettle\n' > "$script"
now() { date +%s.%N; }
run() {
  case $1 in
    before) "$before" shell < "$script" > /dev/null ;;
    after) "$after" shell < "$script" > /dev/null ;;
    pipe) bash -c 'head -c 1073741824 /dev/zero | cat > /dev/null' ;;
  esac
}
declare -A took
printf '%-6s %9s %9s %9s\n' round before_s after_s pipe_s
for r in $(seq "$rounds"); do
  case $((r % 3)) in
    0) order="before after pipe" ;;
    1) order="after pipe before" ;;
    *) order="pipe before after" ;;
  esac
  for side in $order; do
    t0=$(now)
    run "$side"
    t1=$(now)
    took[$side]=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
  done
  printf '%-6s %9s %9s %9s\n' "$r" "${took[before]}" "${took[after]}" "${took[pipe]}"
done
