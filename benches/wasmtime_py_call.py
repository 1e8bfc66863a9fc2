#!/usr/bin/env python3
"""One `job_output` call through the component in Python (wasmtime-py, a fresh
store and instance per call, as hosts/python does), like benches/tool_call.rs.

    scripts/setup-hosts && target/venv/bin/python benches/wasmtime_py_call.py
"""
import sys
import time
sys.path.insert(0, "hosts/python")
from harness_jobs.guest import Guest
job = {"id": "bash-1", "kind": "bash", "label": "make", "status": "running", "detail": None,
       "started_at": 1767225600000, "finished_at": None, "output_limit_bytes": None, "reported": False}
class B:
    def list_jobs(self, c): return [job]
    def get(self, c, i): return job
    def read(self, c, i): return "line of output\n", job
    def now_ms(self): return 1767225605000
g = Guest("target/tool-jobs.wasm", B())
cfg = g.configure("{}")
args = '{"job_id":"bash-1"}'
assert g.invoke_step(None, cfg, "job_output", args)[1]["text"] == "line of output\n[status: running]"
n = 2000
t = time.perf_counter()
for _ in range(n): g.invoke_step(None, cfg, "job_output", args)
print(f"wasmtime-py, fresh instance per call: {(time.perf_counter()-t)/n*1e6:.1f} µs per call")
