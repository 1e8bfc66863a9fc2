#!/usr/bin/env python3
"""One tool call through two jobs-host builds, side by side: `jobs-host mcp`
over stdio, a running job, then non-blocking `job_output` calls (and `job_list`
of the same session) alternating between the two builds, each timed from the
request's write to its answer's read. Prints the median and p90 of each and
their ratio.

    python3 benches/tool_call_ab.py BEFORE_BIN AFTER_BIN [--calls 2000]
"""

import argparse
import json
import statistics
import subprocess
import time


class Server:
    def __init__(self, binary):
        self.p = subprocess.Popen([binary, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, bufsize=0)
        self.next_id = 0
        self.call("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "bench", "version": "0"}})
        self.p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        self.tool("bash", {"command": "seq 1 50; exec sleep 600"})
        time.sleep(0.3)
        self.tool("job_output", {"job_id": "bash-1"})

    def call(self, method, params):
        self.next_id += 1
        line = json.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method,
                           "params": params}).encode() + b"\n"
        start = time.perf_counter()
        self.p.stdin.write(line)
        while True:
            reply = json.loads(self.p.stdout.readline())
            if reply.get("id") == self.next_id:
                return time.perf_counter() - start

    def tool(self, name, arguments):
        return self.call("tools/call", {"name": name, "arguments": arguments})

    def close(self):
        self.p.stdin.close()
        self.p.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("before")
    parser.add_argument("after")
    parser.add_argument("--calls", type=int, default=2000)
    args = parser.parse_args()
    servers = {"before": Server(args.before), "after": Server(args.after)}
    times = {name: {"job_output": [], "job_list": []} for name in servers}
    for n in range(args.calls):
        for name in (("before", "after") if n % 2 == 0 else ("after", "before")):
            server = servers[name]
            times[name]["job_output"].append(server.tool("job_output", {"job_id": "bash-1"}))
            times[name]["job_list"].append(server.tool("job_list", {}))
    for server in servers.values():
        server.close()
    for tool in ("job_output", "job_list"):
        medians = {}
        for name in servers:
            xs = sorted(times[name][tool])
            medians[name] = statistics.median(xs)
            print(f"{tool:10} {name:6} median {medians[name] * 1e6:7.1f} us  "
                  f"p90 {xs[int(0.9 * len(xs))] * 1e6:7.1f} us")
        print(f"{tool:10} after/before {medians['after'] / medians['before']:.3f}")


if __name__ == "__main__":
    main()
