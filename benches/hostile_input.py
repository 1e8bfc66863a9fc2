#!/usr/bin/env python3
"""Hostile input against `jobs-host mcp --extensions all`: what the worst
pattern the bounds admit costs in memory, whether the session stays responsive
while slow searches and ready waits run, what a page through a very long line
costs, and whether SIGTERM still ends the host in time.

Figures (a benchmark, not a test; every wait is bounded):

  rss-patterns   peak host RSS over idle while 20 concurrent job_log searches
                 and 20 concurrent `until` waits use the worst 4 KiB patterns
  list-latency   job_list p50/p99/max from the same session while three slow
                 searches and three slow ready waits run
  sigterm        time from SIGTERM to exit while those calls are in flight
  disconnect     stdin closed while a wait is in flight: job and host gone
  long-line      host RSS added by job_log pages and a search over a 60 MB line

Usage: python3 benches/hostile_input.py [--bin target/release/jobs-host]
"""

import argparse
import json
import os
import signal
import subprocess
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Patterns at the 4 KiB bound that cost the most to parse and compile: Unicode
# classes (hundreds of ranges each), counted repetition, and a literal.
WORST = {
    "\\w x2048": "\\w" * 2048,
    "\\pL x1365": "\\pL" * 1365,
    "[a-z]{4000}[A-Z]": "[a-z]{4000}[A-Z]",
    "literal 4096": "a" * 4096,
}
# What makes the lazy DFA give up and the matcher crawl: the slow case of the
# issue, per 4 KB line.
SLOW = "[a-z]{3000}[A-Z]"


class Host:
    def __init__(self, binary):
        self.tmp = tempfile.mkdtemp()
        self.proc = subprocess.Popen(
            [binary, "mcp", "--extensions", "all"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            env={"PATH": os.environ["PATH"], "HOME": os.environ.get("HOME", "/"), "TMPDIR": self.tmp},
        )
        self.lock = threading.Lock()
        self.waiting = {}
        self.next_id = 1
        threading.Thread(target=self._read, daemon=True).start()
        self.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                    "clientInfo": {"name": "bench", "version": "0"}})
        self._send({"jsonrpc": "2.0", "method": "notifications/initialized"})

    def _read(self):
        for line in self.proc.stdout:
            msg = json.loads(line)
            if "id" in msg:
                with self.lock:
                    slot = self.waiting.pop(msg["id"], None)
                if slot:
                    slot[1].append(msg)
                    slot[0].set()

    def _send(self, msg):
        data = (json.dumps(msg) + "\n").encode()
        with self.lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def request(self, method, params, timeout=300):
        done, box = threading.Event(), []
        with self.lock:
            rid = self.next_id
            self.next_id += 1
            self.waiting[rid] = (done, box)
        self._send({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        if not done.wait(timeout):
            raise TimeoutError(method)
        return box[0]

    def call(self, tool, args, timeout=300):
        reply = self.request("tools/call", {"name": tool, "arguments": args}, timeout)
        return reply["result"]["content"][-1]["text"]

    def status(self, key):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])  # kB
        return 0

    def job(self, command):
        started = self.call("bash", {"command": command})
        job = started.rsplit(" ", 1)[1]
        for _ in range(60000):
            if f"{job} [bash] completed" in self.call("job_list", {}):
                return job
            time.sleep(0.01)
        raise TimeoutError(command)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(30)


def concurrently(n, work):
    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def rss_patterns(binary):
    host = Host(binary)
    done = host.job("seq 1 2000")
    live = host.call("bash", {"command": "exec sleep 300"}).rsplit(" ", 1)[1]
    idle = host.status("VmRSS")
    rows = []
    for name, pattern in WORST.items():
        concurrently(20, lambda i: host.call("job_log", {"job_id": done, "search": pattern}))
        concurrently(20, lambda i: host.call("job_output", {"job_id": live, "until": pattern, "timeout_ms": 50}))
        rows.append((name, host.status("VmHWM") - idle))
    host.close()
    return idle, rows


def list_latency_and_sigterm(binary):
    host = Host(binary)
    slow = host.job("for i in $(seq 300); do head -c 4000 /dev/zero | tr '\\0' a; echo; done")
    # A live job whose lines are slow to match, for the ready waits.
    live = host.call("bash", {"command": "for i in $(seq 300); do head -c 4000 /dev/zero | tr '\\0' a; echo; done; exec sleep 300"}).rsplit(" ", 1)[1]
    stop = threading.Event()

    def searching(i):
        while not stop.is_set():
            host.call("job_log", {"job_id": slow, "search": SLOW, "context": 0})

    def waiting(i):
        while not stop.is_set():
            host.call("job_output", {"job_id": live, "until": SLOW, "timeout_ms": 2000})

    workers = [threading.Thread(target=searching, args=(i,), daemon=True) for i in range(3)]
    workers += [threading.Thread(target=waiting, args=(i,), daemon=True) for i in range(3)]
    for w in workers:
        w.start()
    time.sleep(1)
    samples = []
    for _ in range(200):
        t0 = time.perf_counter()
        host.call("job_list", {})
        samples.append((time.perf_counter() - t0) * 1000)
        time.sleep(0.01)
    samples.sort()
    t0 = time.perf_counter()
    host.proc.send_signal(signal.SIGTERM)
    host.proc.wait(30)
    term = time.perf_counter() - t0
    stop.set()
    return samples, term


def long_line(binary):
    host = Host(binary)
    # The same calls on a job of short lines first, so what the calls cost in
    # themselves (an instance's pages, buffers) is paid before the long line.
    short = host.job("echo x; echo after")
    job = host.job("head -c 60000000 /dev/zero | tr '\\0' x; echo; echo after")
    for target in (short, job):
        before = host.status("VmHWM")
        for _ in range(4):
            host.call("job_log", {"job_id": target, "lines": 2})
            host.call("job_log", {"job_id": target, "search": "after"})
        grew = host.status("VmHWM") - before
    rss = host.status("VmRSS")
    host.close()
    return rss, max(grew, 0)


def disconnect(binary):
    """Stdin closed while a long wait is in flight: when the job and the host are gone."""
    host = Host(binary)
    host.call("bash", {"command": "echo $$; exec sleep 300"})
    pid = None
    while pid is None:
        text = host.call("job_output", {"job_id": "bash-1"})
        if text[0].isdigit():
            pid = int(text.split("\n")[0])
        time.sleep(0.01)
    waiting = threading.Thread(
        target=lambda: host.call("job_output", {"job_id": "bash-1", "wait": True, "timeout_ms": 100000}, 30),
        daemon=True)
    waiting.start()
    host.request("ping", {})
    t0 = time.perf_counter()
    host.proc.stdin.close()

    def alive():
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
        except OSError:
            return False
    while alive():
        time.sleep(0.001)
    gone = time.perf_counter() - t0
    host.proc.wait(30)
    return gone, time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(ROOT, "target", "release", "jobs-host"))
    args = ap.parse_args()
    idle, rows = rss_patterns(args.bin)
    print(f"rss-patterns: idle {idle / 1024:.1f} MiB")
    for name, grew in rows:
        print(f"  {name:>18}: peak {grew / 1024:+.1f} MiB over idle (20 searches + 20 waits)")
    samples, term = list_latency_and_sigterm(args.bin)
    p = lambda q: samples[min(len(samples) - 1, int(q * len(samples)))]
    print(f"list-latency (3 slow searches + 3 slow waits): p50 {p(0.5):.1f} ms, p99 {p(0.99):.1f} ms, max {samples[-1]:.1f} ms")
    print(f"sigterm: exit {term:.2f} s after SIGTERM (shutdown grace 1 s)")
    for _ in range(3):
        gone, exited = disconnect(args.bin)
        print(f"disconnect mid-wait: job gone {gone:.3f} s, host exited {exited:.3f} s after stdin closed")
    before, grew = long_line(args.bin)
    print(f"long-line (60 MB): RSS {before / 1024:.1f} MiB, +{grew / 1024:.2f} MiB peak after 4 pages and 4 searches")


if __name__ == "__main__":
    main()
