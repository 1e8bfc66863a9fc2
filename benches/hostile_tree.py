#!/usr/bin/env python3
"""A hostile job tree (setsid and set -m children, a TERM-ignoring child) under
`jobs-host mcp`: job_kill, then SIGTERM, SIGINT and SIGKILL to the host; prints
what survives (ps) and what is left in the host's TMPDIR.

Usage: python3 benches/hostile_tree.py target/release/jobs-host [--tty]
(--tty: the tree runs on a pseudo-terminal, through the terminal extension)
"""
import json, os, signal, subprocess, sys, tempfile, time
BIN = sys.argv[1]
TTY = "--tty" in sys.argv[2:]
TREE = ("setsid sh -c 'sleep 3001' & (set -m; sleep 3002 & sh -c 'sleep 3003' &) ; "
        "sh -c 'trap \"\" TERM; sleep 3004' & trap '' TERM; sleep 3005")
def survivors():
    out = subprocess.run(["ps", "-eo", "pid,args"], capture_output=True, text=True).stdout
    return [l.strip() for l in out.splitlines() if "sleep 300" in l and "ps -eo" not in l]
def host(tmp):
    p = subprocess.Popen([BIN, "mcp", *(["--extensions", "all"] if TTY else [])], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
                         env=dict(os.environ, TMPDIR=tmp), stderr=subprocess.DEVNULL)
    n = [0]
    def rpc(method, params=None):
        n[0] += 1
        p.stdin.write(json.dumps({"jsonrpc": "2.0", "id": n[0], "method": method, "params": params or {}}) + "\n"); p.stdin.flush()
        while True:
            m = json.loads(p.stdout.readline())
            if m.get("id") == n[0]: return m
    rpc("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "h", "version": "0"}})
    p.stdin.write('{"jsonrpc":"2.0","method":"notifications/initialized"}\n'); p.stdin.flush()
    return p, rpc
def call(rpc, name, args):
    r = rpc("tools/call", {"name": name, "arguments": args})["result"]
    return [c["text"] for c in r["content"]], r.get("structuredContent")
def wait_for(cond, s=10):
    end = time.time() + s
    while time.time() < end:
        if cond(): return True
        time.sleep(0.05)
    return cond()
# 1. job_kill on the hostile tree
tmp = tempfile.mkdtemp()
p, rpc = host(tmp)
START = {"command": TREE, **({"tty": True} if TTY else {})}
print("start:", call(rpc, "bash", START))
wait_for(lambda: len(survivors()) >= 5)
print("tree:", len(survivors()), "processes")
print("kill:", call(rpc, "job_kill", {"job_id": "bash-1"}))
print("read:", call(rpc, "job_output", {"job_id": "bash-1", "wait": True, "timeout_ms": 20000})[0])
print("after job_kill, survivors:", survivors())
p.stdin.close(); p.wait(10)
print("spill left in TMPDIR:", os.listdir(tmp))
# 2. signals to the host itself
for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGKILL):
    tmp = tempfile.mkdtemp()
    p, rpc = host(tmp)
    call(rpc, "bash", START)
    wait_for(lambda: len(survivors()) >= 5)
    n = len(survivors())
    p.send_signal(sig)
    code = p.wait(10)
    gone = wait_for(lambda: not survivors(), 10)
    left = os.listdir(tmp) if gone else None
    wait_for(lambda: not os.listdir(tmp), 5)
    print(f"{sig.name}: tree {n}, host exit {code}, survivors {survivors()}, TMPDIR {os.listdir(tmp)}")
