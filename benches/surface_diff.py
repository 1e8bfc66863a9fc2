#!/usr/bin/env python3
"""Everything the model sees, from two jobs-host builds, compared byte for byte.

Drives `jobs-host mcp` over stdio, once per profile (a, b, c) with no
extensions and with all of them, through the same script: the handshake, the
tool list, and a fixed series of calls (starts, reads, waits, lists, kills,
extension tools, and every kind of bad argument and unknown id), each
followed by its answer. The answers of the two builds must be identical, but
for what differs from run to run by nature (times, durations, pids, task ids),
which is masked the same way in both.

    python3 benches/surface_diff.py BEFORE_BIN AFTER_BIN

Exits 0 when every answer is the same, 1 with the first differences printed.
"""

import json
import re
import subprocess
import sys
import tempfile
import time

PROFILE_CALLS = {
    "a": ("job_output", "job_list", "job_kill", "job_id"),
    "b": ("task_output", "task_list", "task_kill", "task_id"),
}


def calls(profile, extensions):
    """The tool calls of one session: (tool, arguments)."""
    out = [
        ("bash", {"command": "echo hi; printf 'err\\n' >&2"}),
        ("bash", {"command": "exit 3"}),
        ("bash", {"command": "sleep 30"}),
        ("bash", {}),
        ("bash", {"command": 7}),
        ("bash", {"command": "  "}),
        ("bash", {"command": "x", "workdir": 3}),
        ("nope", {}),
    ]
    if profile in PROFILE_CALLS:
        read, lst, kill, key = PROFILE_CALLS[profile]
        out += [
            (read, {key: "bash-1", "wait": True, "timeout_ms": 10000}),
            (read, {key: "bash-2", "wait": True, "timeout_ms": 10000}),
            (read, {key: "bash-3"}),
            (lst, {}),
            (kill, {key: "bash-3", "reason": "no longer needed"}),
            (read, {key: "bash-3", "wait": True, "timeout_ms": 10000}),
            (read, {key: "bash-9"}),
            (read, {key: ""}),
            (read, {key: "bash-1", "timeout_ms": -1}),
            (read, {}),
            (kill, {key: "bash-1"}),
            (lst, {"extra": 1}),
        ]
        if extensions:
            out += [
                ("bash", {"command": "cat", "stdin": True, "name": "cat"}),
                ("bash", {"command": "cat", "stdin": True, "name": "cat"}),
                (f"{key.split('_')[0]}_input", {key: "bash-4", "text": "hello"}),
                (read, {key: "bash-4", "wait": True, "until": "hello", "timeout_ms": 10000}),
                (f"{key.split('_')[0]}_log", {key: "bash-1", "search": "h."}),
                (f"{key.split('_')[0]}_log", {key: "bash-1", "search": "("}),
                (f"{key.split('_')[0]}_signal", {key: "bash-4", "signal": "TERM"}),
                (read, {key: "bash-4", "wait": True, "timeout_ms": 10000}),
                ("bash", {"command": "echo y", "yield_ms": 5000}),
                ("bash", {"command": "x", "yield_ms": 5}),
                ("bash", {"command": "x", "timeout_ms": 0.5}),
                ("bash", {"command": "x", "tty": "yes"}),
                ("bash", {"command": "x", "rows": 3}),
                ("bash", {"command": "x", "sandbox": {"files": "nope"}}),
                (f"{key.split('_')[0]}_resize", {key: "bash-1", "rows": 10, "cols": 10}),
            ]
    else:
        out += [
            ("job_wait", {"id": "bash-1"}),
            ("job_wait", {"id": "bash-2"}),
            ("job_status", {"id": "bash-1"}),
            ("job_status", {"id": "bash-3"}),
            ("job_list", {}),
            ("job_cancel", {"id": "bash-3"}),
            ("job_wait", {"id": "bash-3"}),
            ("job_status", {"id": "nope"}),
            ("job_status", {}),
            ("job_wait", {"id": "bash-1", "timeout_seconds": -2}),
        ]
        if extensions:
            out += [
                ("bash", {"command": "cat", "stdin": True}),
                ("job_input", {"id": "bash-4", "text": "hello"}),
                ("job_wait", {"id": "bash-4", "until": "hello", "timeout_seconds": 10}),
                ("job_log", {"id": "bash-1", "search": "h."}),
                ("job_signal", {"id": "bash-4", "signal": "KILL"}),
                ("job_wait", {"id": "bash-4"}),
                ("bash", {"command": "x", "yield_ms": 5}),
                ("bash", {"command": "x", "tty": "yes"}),
            ]
    return out


MASKS = [
    (re.compile(r"\d+(\.\d+)?(ms|s)\b"), "<duration>"),
    (re.compile(r"\b\d{10,}\b"), "<time>"),
    (re.compile(r"\d{4}-\d\d-\d\dT[0-9:.]+Z"), "<timestamp>"),
    (re.compile(r"\b[0-9a-f]{32}\b"), "<task>"),
    (re.compile(r"\bpid \d+\b"), "pid <n>"),
    (re.compile(r"\d+m\d\ds\b"), "<duration>"),
]


def mask(text):
    for pattern, replacement in MASKS:
        text = pattern.sub(replacement, text)
    return text


def session(binary, profile, extensions, workdir):
    args = [binary, "mcp", "--profile", profile, "--workdir", workdir]
    if extensions:
        args += ["--extensions", "all"]
    lines = [
        {"jsonrpc": "2.0", "id": 0, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "surface-diff", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
    ]
    p = subprocess.Popen(args, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, bufsize=0)
    answers = []
    notices = []

    def ask(msg):
        p.stdin.write((json.dumps(msg) + "\n").encode())
        if "id" not in msg:
            return
        while True:
            line = p.stdout.readline()
            if not line:
                raise SystemExit(f"{binary} ended early")
            reply = json.loads(line)
            # Logging notifications come when a job ends, whenever that is;
            # the same notice is in the next result, which is compared.
            if reply.get("id") == msg["id"]:
                answers.append(split_notices(reply, notices))
                return

    for msg in lines:
        ask(msg)
    for n, (tool, arguments) in enumerate(calls(profile, extensions), start=2):
        ask({"jsonrpc": "2.0", "id": n, "method": "tools/call",
             "params": {"name": tool, "arguments": arguments}})
        # A call that may end a job is given the moment its job takes to
        # end, so its notice comes with the next result in both runs (a
        # read that saw the end first would leave none).
        if tool == "bash" or tool.endswith(("_kill", "_cancel", "_signal", "_input")):
            time.sleep(0.3)
    p.stdin.close()
    p.wait(timeout=60)
    # Which result a notice comes before depends on when its job ended; that
    # it comes, once, and in what words, does not.
    answers.append("notices: " + json.dumps(sorted(notices), ensure_ascii=False))
    return answers


def split_notices(reply, notices):
    """The reply with its notice blocks taken out (into `notices`, one item
    per job: profile C's batched update is split at its items)."""
    content = reply.get("result", {}).get("content")
    if isinstance(content, list) and len(content) > 1:
        for block in content[:-1]:
            text = mask(block.get("text", ""))
            header = "Background job update:\n"
            if text.startswith(header):
                notices.extend("- " + item for item in text[len(header) + 2:].split("\n- "))
            else:
                notices.append(text)
        reply["result"]["content"] = content[-1:]
    return mask(json.dumps(reply, ensure_ascii=False))


def main():
    before, after = sys.argv[1], sys.argv[2]
    differ = 0
    total = 0
    with tempfile.TemporaryDirectory() as workdir:
        for profile in ("a", "b", "c"):
            for extensions in (False, True):
                a = session(before, profile, extensions, workdir)
                b = session(after, profile, extensions, workdir)
                total += max(len(a), len(b))
                for i, (x, y) in enumerate(zip(a, b)):
                    if x != y:
                        differ += 1
                        print(f"profile {profile}, extensions {extensions}, answer {i}:")
                        print(f"  before: {x[:600]}")
                        print(f"  after:  {y[:600]}")
                if len(a) != len(b):
                    differ += 1
                    print(f"profile {profile}, extensions {extensions}: {len(a)} vs {len(b)} answers")
    print(f"{total} answers compared, {differ} differ")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
