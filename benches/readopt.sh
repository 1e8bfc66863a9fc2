#!/usr/bin/env bash
# Re-adopting running jobs after a `kill -9` of the daemon: N `sleep` jobs in
# a durable session, the daemon killed, then a new client of the same key
# (which starts a daemon that takes them all on) until its first answer,
# against the same client start with nothing to take on. Rounds alternate.
# Usage: benches/readopt.sh [BIN] [N] [ROUNDS]   (BIN: a release jobs-host,
#   with jobs-host-monitor beside it)
set -euo pipefail
bin=${1:-target/release/jobs-host}
n=${2:-1000}
rounds=${3:-5}
work=$(mktemp -d)
trap 'pkill -9 -f "$work" 2>/dev/null; "$bin" daemon --stop >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export XDG_RUNTIME_DIR=$work/run XDG_STATE_HOME=$work/state
mkdir -m 700 "$XDG_RUNTIME_DIR" "$XDG_STATE_HOME"
now() { date +%s.%N; }
start=$(mktemp -p "$work")
for _ in $(seq "$n"); do echo "bash exec sleep 600 # $work"; done > "$start"
printf '%-6s %10s %12s %8s\n' round empty_s readopt_s jobs
for r in $(seq "$rounds"); do
  # With nothing to take on: a fresh daemon and a session.
  "$bin" daemon --stop > /dev/null 2>&1 || true
  t0=$(now); echo job_list | "$bin" shell --session "empty-$r" --linger 0s > /dev/null; t1=$(now)
  "$bin" daemon --stop > /dev/null 2>&1 || true
  "$bin" shell --session "k-$r" --max-jobs-per-owner "$n" < "$start" > /dev/null
  kill -9 "$(cat "$XDG_RUNTIME_DIR/jobs-host/daemon.lock")"
  sleep 0.5
  t2=$(now); echo job_list | "$bin" shell --session "k-$r" --max-jobs-per-owner "$n" --linger 1m > /dev/null; t3=$(now)
  listed=$("$bin" ps --session "k-$r" --json | python3 -c 'import json,sys; print(sum(j["status"] == "running" for j in json.load(sys.stdin)["jobs"]))')
  awk -v r="$r" -v a="$t0" -v b="$t1" -v c="$t2" -v d="$t3" -v j="$listed" \
    'BEGIN { printf "%-6s %10.3f %12.3f %8d\n", r, b-a, d-c, j }'
  "$bin" daemon --stop > /dev/null 2>&1 || true
done
