#!/usr/bin/env python3
"""Tool calls while jobs flood their output: does a job that never stops writing
slow down everyone else's calls?

    cargo build --release -p jobs-host
    python3 benches/busy_jobs.py [--flooders 4] [--calls 40] [--bin target/release/jobs-host]

Starts `--flooders` jobs running `cat /dev/zero` over MCP, then times `job_list`
calls (one every 50 ms) and prints p50 and max, against the same calls with no
job running (the baseline, measured first in the same session).
"""

import argparse
import json
import subprocess
import sys
import time


class Client:
    def __init__(self, argv):
        self.host = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.next_id = 0
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "busy-jobs", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, message):
        self.host.stdin.write(json.dumps(message) + "\n")
        self.host.stdin.flush()

    def request(self, method, params):
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        while True:
            reply = json.loads(self.host.stdout.readline())
            if reply.get("id") == self.next_id:
                return reply

    def call(self, tool, arguments):
        return self.request("tools/call", {"name": tool, "arguments": arguments})

    def close(self):
        self.host.stdin.close()
        self.host.wait(timeout=60)


def timed_lists(client, calls):
    took = []
    for _ in range(calls):
        began = time.monotonic()
        client.call("job_list", {})
        took.append((time.monotonic() - began) * 1000)
        time.sleep(0.05)
    took.sort()
    return f"p50 {took[len(took) // 2]:.1f} ms, max {took[-1]:.1f} ms"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--flooders", type=int, default=4)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--bin", default="target/release/jobs-host")
    args = parser.parse_args()
    client = Client([args.bin, "mcp", "--max-jobs-per-owner", str(args.flooders + 1)])
    print(f"job_list, no job running: {timed_lists(client, args.calls)}")
    for _ in range(args.flooders):
        client.call("bash", {"command": "cat /dev/zero"})
    time.sleep(1)
    print(f"job_list, {args.flooders} jobs writing without pause: {timed_lists(client, args.calls)}")
    client.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
