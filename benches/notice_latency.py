#!/usr/bin/env python3
"""Job exit to MCP notice: how long after a background job's last instruction its
completion notice reaches an MCP client, against the same command's exit seen by a
plain Python parent (the baseline), in alternating rounds.

    cargo build --release -p jobs-host
    python3 benches/notice_latency.py [--jobs 200] [--bin target/release/jobs-host] [-- MCP ARGS]

Each job runs `printf '%s\\n' $EPOCHREALTIME` (a bash builtin: the time its last
instruction ran) and exits; latency is the moment the notice (an MCP logging
notification) is read minus that time. Prints p50, p90, p99 and max for both.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time

COMMAND = "printf '%s\\n' $EPOCHREALTIME"


def percentiles(xs):
    xs = sorted(xs)
    at = lambda q: xs[min(len(xs) - 1, int(q * len(xs)))]
    return {"p50": at(0.50), "p90": at(0.90), "p99": at(0.99), "max": xs[-1], "n": len(xs)}


class Client:
    def __init__(self, binary, extra):
        self.p = subprocess.Popen([binary, "mcp", *extra], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, bufsize=0)
        self.next_id = 1
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def send(self, msg):
        self.p.stdin.write((json.dumps(msg) + "\n").encode())

    def read(self):
        line = self.p.stdout.readline()
        if not line:
            sys.exit("the server closed its output")
        return time.time(), json.loads(line)

    def request(self, method, params):
        rid = self.next_id
        self.next_id += 1
        self.send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        notices = []
        while True:
            at, msg = self.read()
            if msg.get("id") == rid:
                return msg, notices
            notices.append((at, msg))

    def wait_notice(self):
        while True:
            at, msg = self.read()
            if msg.get("method") == "notifications/message":
                return at, msg

    def close(self):
        self.p.stdin.close()
        self.p.wait()


def ours(client):
    reply, early = client.request("tools/call", {"name": "bash", "arguments": {"command": COMMAND}})
    # The start's text is `started background job <id>` (results carry no
    # structured value unless the server runs with --structured-output).
    job = reply["result"]["content"][-1]["text"].rsplit(" ", 1)[1]
    notice = next((n for n in early if n[1].get("method") == "notifications/message"), None)
    at, msg = notice or client.wait_notice()
    assert job in msg["params"]["data"]["text"], msg
    # The job's own output is in its spill/memory; the notice does not carry it,
    # so read it now (this does not change the measured moment).
    out, _ = client.request("tools/call", {"name": "job_output", "arguments": {"job_id": job}})
    # The notice is also placed before this result; the read is the block with the status.
    text = next(c["text"] for c in out["result"]["content"] if not c["text"].startswith("background job"))
    ran = float(text.split("\n")[0])
    return at - ran


def baseline():
    p = subprocess.Popen(["bash", "-c", COMMAND], stdout=subprocess.PIPE)
    out = p.stdout.read()
    p.wait()
    at = time.time()
    return at - float(out.decode().split("\n")[0])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=200)
    ap.add_argument("--bin", default="target/release/jobs-host")
    ap.add_argument("host_args", nargs="*", help="more arguments for `jobs-host mcp` (after --)")
    args = ap.parse_args()
    client = Client(args.bin, args.host_args)
    mine, base = [], []
    for _ in range(args.jobs):
        mine.append(ours(client) * 1000)
        base.append(baseline() * 1000)
    client.close()
    for name, xs in (("jobs-host notice", mine), ("python parent", base)):
        p = percentiles(xs)
        print(f"{name:17} p50 {p['p50']:.2f} ms  p90 {p['p90']:.2f} ms  p99 {p['p99']:.2f} ms  max {p['max']:.2f} ms  (n={p['n']}, mean {statistics.mean(xs):.2f})")


if __name__ == "__main__":
    main()
