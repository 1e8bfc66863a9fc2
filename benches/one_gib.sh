#!/usr/bin/env bash
# One job writing 1 GiB through `jobs-host shell` until settled, against
# `head -c 1G /dev/zero | cat > /dev/null`, side by side in each round.
# Usage: benches/one_gib.sh [ROUNDS]   (needs target/release/jobs-host;
# JOBS_HOST_BIN names another build, to compare two side by side)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-10}
bin=${JOBS_HOST_BIN:-target/release/jobs-host}
[ -x "$bin" ] || cargo build --release -q -p jobs-host
script=$(mktemp)
trap 'rm -f "$script"' EXIT
printf 'bash head -c 1073741824 /dev/zero\nsettle\n' > "$script"
now() { date +%s.%N; }
printf '%-6s %10s %10s %7s\n' round ours_s pipe_s ratio
for r in $(seq "$rounds"); do
  t0=$(now)
  "$bin" shell < "$script" > /dev/null
  t1=$(now)
  bash -c 'head -c 1073741824 /dev/zero | cat > /dev/null'
  t2=$(now)
  awk -v r="$r" -v a="$t0" -v b="$t1" -v c="$t2" \
    'BEGIN { printf "%-6s %10.3f %10.3f %7.2f\n", r, b-a, c-b, (b-a)/(c-b) }'
done
