#!/usr/bin/env python3
"""Starts real jobs, reads one with a wait, kills one, and prints a notice.

python3 hosts/python/example.py [path/to/tool-jobs.wasm]

Without a path it loads the component the installed package carries.
"""

import sys
import threading

from harness_jobs import Lane, Notice, Plugin, Registry, bundled_component

wasm = sys.argv[1] if len(sys.argv) > 1 else bundled_component()
registry = Registry()
noticed = threading.Event()


def on_notice(owner: str | None, lane: Lane, notice: Notice) -> None:
    print(f"notice for {owner} ({lane}): {notice['text']}")
    noticed.set()


plugin = Plugin(wasm, registry, '{"profile":"a"}', on_notice=on_notice)
owner = "session-1"
print("tools:", ", ".join(t["name"] for t in plugin.tool_definitions()))


def start(command: str) -> str:
    """Starts `command` as the model does, with the guest's own start tool."""
    started = plugin.invoke(owner, "bash", {"command": command})
    print(started["text"])
    value = started["value"]
    assert isinstance(value, dict), started
    return str(value["jobId"])


build = start("echo compiling; sleep 0.2; echo built")
server = start("echo serving; sleep 60")
tests = start("sleep 0.3; echo 12 passed")

print(plugin.invoke(owner, "job_list", {})["text"])
print(plugin.invoke(owner, "job_output", {"job_id": build, "wait": True, "timeout_ms": 10000})["text"])
print(plugin.invoke(owner, "job_kill", {"job_id": server, "reason": "not needed"})["text"])
# Nobody reads the test job: when it finishes, its owner gets a notice.
if not noticed.wait(10):
    sys.exit("no notice arrived")
print(plugin.invoke(owner, "job_output", {"job_id": server, "wait": True, "timeout_ms": 10000})["text"])
registry.close()
