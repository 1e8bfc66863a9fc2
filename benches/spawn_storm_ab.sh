#!/usr/bin/env bash
# The spawn storm through two jobs-host binaries and bash's own `&`, one after
# another in every round: 1,000 background `true` jobs started, settled and
# listed through `jobs-host shell`, against 1,000 concurrent `bash -c true`.
# Usage: benches/spawn_storm_ab.sh BEFORE_BIN AFTER_BIN [ROUNDS]
#   (LOOP_SHELL=dash runs the loop in dash, whose `&` forks a smaller
#   process than bash's)
#   (build the other commit with `cargo build --release -p jobs-host` in a
#   clone of it; the first round also compiles each binary's component)
set -euo pipefail
before=$1
after=$2
rounds=${3:-8}
loop_shell=${LOOP_SHELL:-bash}
n=1000
script=$(mktemp)
trap 'rm -f "$script"' EXIT
{ for _ in $(seq "$n"); do echo "bash true"; done; echo settle; echo job_list; } > "$script"
now() { date +%s.%N; }
printf '%-6s %9s %9s %9s %8s %8s\n' round before_s after_s loop_s bef/loop aft/loop
for r in $(seq "$rounds"); do
  t0=$(now); "$before" shell --max-jobs-per-owner "$n" < "$script" > /dev/null
  t1=$(now); "$after" shell --max-jobs-per-owner "$n" < "$script" > /dev/null
  t2=$(now); "$loop_shell" -c "for i in \$(seq $n); do bash -c true & done; wait"
  t3=$(now)
  awk -v r="$r" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" \
    'BEGIN { printf "%-6s %9.3f %9.3f %9.3f %8.2f %8.2f\n", r, b-a, c-b, d-c, (b-a)/(d-c), (c-b)/(d-c) }'
done
