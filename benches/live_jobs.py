#!/usr/bin/env python3
"""Many jobs alive at once: the host's memory and descriptors per live job.

    cargo build --release -p jobs-host
    python3 benches/live_jobs.py [--jobs 6000] [--bin target/release/jobs-host] [--settle 1] [-- MCP ARGS]
    python3 benches/live_jobs.py --jobs 2000 --one-at-a-time --wrap 'heaptrack -o /tmp/live'

Starts N `exec sleep` jobs over MCP in one burst, waits until each start has
answered, then reads the host's RSS and open descriptors and counts the jobs'
processes. Closing stdin then ends the session; the script checks that no job
process survives it and that the spill directory (in a TMPDIR of its own) is
gone. Every live job holds two host descriptors (its two pipes), so N must
stay under half the hard open-file limit (`ulimit -Hn`), less the host's own
dozen; past it,
starts settle `killed` with `spawn failed: Too many open files`, which the
script reports as failed spawns.

`--one-at-a-time` sends each start once the one before it has answered, so
that the host's peak heap is its live jobs' and not a burst's requests in
flight; `--wrap` runs the host under another program (a heap profiler), in
which case the RSS and descriptors printed are the wrapper's, not the host's.
"""

import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

MARK = "7377"  # in every job's command line, to find its processes


def job_processes():
    out = subprocess.run(["pgrep", "-f", f"sleep {MARK}"], capture_output=True, text=True).stdout
    return len(out.split())


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=6000)
    parser.add_argument("--bin", default="target/release/jobs-host")
    parser.add_argument("--settle", type=float, default=1.0,
                        help="seconds between the last spawn and the reading, as a host "
                             "with live jobs spends most of its time after a burst")
    parser.add_argument("--one-at-a-time", action="store_true")
    parser.add_argument("--wrap", default="", help="a command the host runs under")
    parser.add_argument("mcp_args", nargs="*")
    args = parser.parse_args()

    spill = tempfile.mkdtemp(prefix="live-jobs-")
    host = subprocess.Popen(
        shlex.split(args.wrap) + [args.bin, "mcp", "--max-jobs-per-owner", str(args.jobs + 1)]
        + args.mcp_args,
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        text=True, env=dict(os.environ, TMPDIR=spill))
    requests = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "live-jobs", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
    ]
    requests += [
        {"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
         "params": {"name": "bash", "arguments": {"command": f"exec sleep {MARK}"}}}
        for i in range(args.jobs)
    ]
    began = time.monotonic()
    answered = refused = 0

    def answer():
        nonlocal answered, refused
        line = host.stdout.readline()
        if not line:
            sys.exit("the host closed its output")
        if not line.startswith("{"):
            return  # a wrapper's own words
        reply = json.loads(line)
        if "id" in reply:
            answered += 1
            refused += bool(reply.get("result", {}).get("isError"))

    if args.one_at_a_time:
        for request in requests:
            host.stdin.write(json.dumps(request) + "\n")
            host.stdin.flush()
            target = answered + ("id" in request)
            while answered < target:
                answer()
    else:
        host.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        host.stdin.flush()
        while answered < args.jobs + 1:
            answer()
    took = time.monotonic() - began
    # A spawn runs after its start answered; give the last ones time to run.
    deadline = time.monotonic() + 60
    while job_processes() < args.jobs - refused and time.monotonic() < deadline:
        time.sleep(0.2)
    time.sleep(args.settle)
    alive = job_processes()
    fds = len(os.listdir(f"/proc/{host.pid}/fd"))
    rss_kb = next(int(line.split()[1]) for line in open(f"/proc/{host.pid}/status")
                  if line.startswith("VmRSS"))
    print(f"{args.jobs} starts answered in {took:.1f} s ({refused} refused); "
          f"{alive} job processes alive, {args.jobs - refused - alive} failed spawns")
    print(f"host: {rss_kb} KB RSS ({rss_kb * 1024 / max(alive, 1) / 1024:.1f} KB per live job), "
          f"{fds} open descriptors")
    host.stdin.close()
    host.wait(timeout=120)
    time.sleep(1)
    left = job_processes()
    print(f"after stdin closed: exit {host.returncode}, {left} job processes left, "
          f"spill directory entries {os.listdir(spill)}")
    return 0 if left == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
