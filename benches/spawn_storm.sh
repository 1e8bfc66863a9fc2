#!/usr/bin/env bash
# 1,000 background `true` jobs started, settled and listed through `jobs-host
# shell`, against 1,000 concurrent `bash -c true` from a bash loop, side by side.
# Usage: benches/spawn_storm.sh [N] [ROUNDS]   (needs target/release/jobs-host)
# JOBS_HOST_FLAGS adds flags to the host's side, for example
# JOBS_HOST_FLAGS="--sandbox workspace-write --sandbox-network off".
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-1000}
rounds=${2:-5}
bin=target/release/jobs-host
[ -x "$bin" ] || cargo build --release -q -p jobs-host
script=$(mktemp)
trap 'rm -f "$script"' EXIT
{ for _ in $(seq "$n"); do echo "bash true"; done; echo settle; echo job_list; } > "$script"
now() { date +%s.%N; }
printf '%-6s %10s %10s %7s\n' round ours_s loop_s ratio
for r in $(seq "$rounds"); do
  t0=$(now)
  # shellcheck disable=SC2086 # the flags are words
  "$bin" shell --max-jobs-per-owner "$n" ${JOBS_HOST_FLAGS:-} < "$script" > /dev/null
  t1=$(now)
  bash -c "for i in \$(seq $n); do bash -c true & done; wait"
  t2=$(now)
  awk -v r="$r" -v a="$t0" -v b="$t1" -v c="$t2" \
    'BEGIN { printf "%-6s %10.3f %10.3f %7.2f\n", r, b-a, c-b, (b-a)/(c-b) }'
done
