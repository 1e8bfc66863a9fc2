#!/usr/bin/env python3
"""Replays the conformance vectors through the component with wasmtime-py.

    python3 conformance/runner-py/run.py --wasm FILE [--vectors DIR] [--report FILE]

The host side is the scripted registry described in conformance/README.md,
answered from each vector's job table; the component is driven through the
Python reference host's `Guest` (hosts/python).
"""

import argparse
import copy
import glob
import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "hosts", "python"))

from harness_jobs.guest import (  # noqa: E402
    Guest,
    GuestError,
    RegistryError,
    _plain,
    _record,
    config_plain,
    sandbox_plain,
    sandbox_record,
)
from wasmtime.component import Variant  # noqa: E402

TERMINAL = ("completed", "killed", "failed")


def head(s, n):
    b = s.encode()
    if len(b) <= n:
        return s
    end = n
    while end > 0 and (b[end] & 0xC0) == 0x80:
        end -= 1
    return b[:end].decode()


def tail(s, n):
    b = s.encode()
    if len(b) <= n:
        return s
    start = len(b) - n
    while start < len(b) and (b[start] & 0xC0) == 0x80:
        start += 1
    return b[start:].decode()


class Scripted:
    """The registry a vector presents (rules in conformance/README.md)."""

    def __init__(self, vector):
        self.jobs = copy.deepcopy(vector.get("jobs", []))
        self.now = vector.get("now_ms", 0)

    def now_ms(self):
        return self.now

    def find(self, job_id):
        return next((j for j in self.jobs if j["id"] == job_id), None)

    def visible(self, job_id):
        job = self.find(job_id)
        if job is None:
            raise RegistryError("unknown-job", job_id)
        if job.get("owner") == "other":
            raise RegistryError("foreign-job", job_id)
        return job

    def list_jobs(self, caller):
        return [j for j in self.jobs if j.get("owner") != "other"]

    def get(self, caller, job_id):
        return self.visible(job_id)

    def read(self, caller, job_id):
        job = self.visible(job_id)
        text = job.get("pending") or ""
        job["pending"] = ""
        if job["status"] in TERMINAL:
            job["reported"] = True
        return text, job

    def kill(self, caller, job_id, reason):
        job = self.visible(job_id)
        if job.get("cancel_error") is not None:
            raise RegistryError("producer-failed", job["cancel_error"])
        job["reported"] = True
        if job["status"] in TERMINAL:
            return "already-finished"
        job["status"] = "stopping"
        return "requested"

    def output(self, caller, job_id, window):
        job = self.visible(job_id)
        out = job.get("output") or ""
        size = len(out.encode())
        if size <= window["whole_up_to"]:
            h, t = out, ""
        else:
            h, t = head(out, window["head_bytes"]), tail(out, window["tail_bytes"])
        return {"head": h, "tail": t, "omitted_bytes": size - len(h.encode()) - len(t.encode()), "job": job}

    def wait(self, job_id, then):
        if "error" in then:
            (kind, payload), = then["error"].items()
            return RegistryError(kind, payload)
        try:
            job = self.visible(job_id)
        except RegistryError as e:
            return e
        job.update(then.get("settle", {}))
        if job["status"] in TERMINAL:
            job["reported"] = True
        return {"job": job, "end": then.get("end"), "matched": then.get("matched"), "prompt": then.get("prompt")}

    def write_input(self, caller, job_id, data, close):
        job = self.visible(job_id)
        if job["status"] in TERMINAL or job.get("input") == "closed":
            raise RegistryError("input-closed")
        if job.get("input") != "open":
            raise RegistryError("no-input")
        job["written"] = job.get("written", "") + data
        if close:
            job["input"] = "closed"
        return len(data.encode())

    def signal(self, caller, job_id, name):
        job = self.visible(job_id)
        if job["status"] in TERMINAL:
            raise RegistryError("producer-failed", f"job {job_id} has already finished")
        job["signals"] = job.get("signals", []) + [name.upper()]

    def lines(self, caller, job_id, query):
        job = self.visible(job_id)
        tag, v = query["tag"], query["payload"]
        if tag == "search":
            job["last_query"] = {"search": {"stream": v["stream"], "pattern": v["pattern"],
                                            "context": v["context"], "max_matches": v["max_matches"]}}
        elif tag == "range":
            job["last_query"] = {"range": {"stream": v["stream"], "start": v["start"], "count": v["count"]}}
        else:
            job["last_query"] = {"last": {"stream": v["stream"], "count": v["count"]}}
        page = job.get("lines") or {}
        if page.get("invalid_pattern") is not None:
            raise RegistryError("invalid-pattern", page["invalid_pattern"])
        return {
            "lines": page.get("lines", []),
            "hits": page.get("hits", []),
            "total_matches": page.get("total_matches", 0),
            "extents": [{"stream": e["stream"], "total_bytes": e.get("total_bytes", 0),
                         "dropped_bytes": e.get("dropped_bytes", 0), "first_line": e.get("first_line", 1),
                         "last_line": e.get("last_line", 0)} for e in page.get("extents", [])],
            "stopped": page.get("stopped"),
            "job": job,
        }

    def ports(self, caller, job_id):
        job = self.visible(job_id)
        if job["status"] in TERMINAL:
            return []
        return job.get("ports", [])


def request_from(v):
    limits = _record(**{k: v["limits"][k] for k in ("timeout_ms", "cpu_seconds", "memory_bytes", "output_bytes")})
    return _record(command=v["command"], workdir=v["workdir"], description=v["description"], stdin=v["stdin"],
                   name=v["name"], limits=limits, yield_ms=v.get("yield_ms"),
                   sandbox=sandbox_record(v.get("sandbox")),
                   tty=None if v.get("tty") is None else _record(rows=v["tty"]["rows"], cols=v["tty"]["cols"]),
                   render=bool(v.get("render", False)), runner=v.get("runner"),
                   resources=None if v.get("resources") is None else _record(
                       cpus=v["resources"].get("cpus"), gpus=v["resources"].get("gpus"),
                       memory_bytes=v["resources"].get("memory_bytes"),
                       custom=list(v["resources"].get("custom", {}).items())))


def made_from(m):
    """``{new: id}``, ``{existing: id}`` or ``{error: {<start-error case>: payload}}``."""
    if "new" in m:
        return Variant("ok", Variant("new", m["new"]))
    if "existing" in m:
        return Variant("ok", Variant("existing", m["existing"]))
    (case, payload), = m["error"].items()
    return Variant("err", Variant(case, None if case == "no-controller" else payload))


def step(guest, scripted, config, s):
    if "configure" in s:
        try:
            return {"ok": config_plain(guest.configure(s["configure"]))}
        except ValueError as e:
            return {"err": str(e)}
    if "state" in s:
        # A copy: later steps change the table, and this answer is kept.
        return {j["id"]: copy.deepcopy(j) for j in scripted.jobs}
    if config is None:
        raise GuestError("the vector has no config")
    if "invoke" in s:
        waits = list(s.get("waits", []))
        requests = []
        kind, out = guest.invoke_step(None, config, s["invoke"], s["args"])
        while kind == "wait":
            asked = {"job_id": out["job_id"], "timeout_ms": out["timeout_ms"]}
            if out.get("until") is not None:
                asked["until"] = out["until"]
            requests.append(asked)
            if not waits:
                raise GuestError(f"the guest asked to wait ({out['job_id']}, {out['timeout_ms']} ms), "
                                 "and the vector has no wait left")
            waited = scripted.wait(out["job_id"], waits.pop(0)["then"])
            kind, out = guest.invoke_step(None, config, s["invoke"], s["args"], waited)
        return dict(out, waits=requests)
    if "tool_definitions" in s:
        return guest.tool_definitions(config)
    if "tool_annotations" in s:
        return [{"name": d["name"], "annotations": d["annotations"]} for d in guest.tool_definitions(config)]
    if "start_tool" in s:
        return guest.start_tool(config)
    if "check_start" in s:
        kind, checked = guest.check_start(config, s["check_start"], s.get("max_command_bytes", 65536))
        if kind == "err":
            return {"err": checked}
        checked_plain = dict(_plain(checked), sandbox=sandbox_plain(checked.sandbox))
        # Only a start on a runner says so: every other vector stays as it was.
        if checked_plain.get("runner") is None:
            checked_plain.pop("runner", None)
            checked_plain.pop("resources", None)
        elif checked_plain.get("resources") is not None:
            res = checked_plain["resources"]
            res["custom"] = dict(res.get("custom") or [])
        return {"ok": checked_plain}
    if "started" in s:
        kind, out = guest.started(config, request_from(s["started"]["request"]), made_from(s["started"]["made"]))
        if kind != "wait":
            return out
        asked = {"job_id": out["job_id"], "timeout_ms": out["timeout_ms"]}
        # With the wait's end given, the host resumes the start under its tool's name.
        waits = s["started"].get("waits", [])
        if not waits:
            return {"wait": asked}
        waited = scripted.wait(out["job_id"], waits[0]["then"])
        kind, resumed = guest.invoke_step(None, config, "bash", s["started"].get("args", "{}"), waited)
        if kind == "wait":
            raise GuestError("a resumed start asked to wait again")
        return dict(resumed, waits=[asked])
    if "describe_call" in s:
        return guest.describe_call(config, s["describe_call"], s["args"])
    if "system_prompt" in s:
        return guest.system_prompt(config)
    if "completion_notice" in s:
        return guest.completion_notice(config, scripted.find(s["completion_notice"]))
    if "deliver" in s:
        return guest.deliver(config, scripted.find(s["deliver"]), s["owner"])
    if "batch_notice" in s:
        return guest.batch_notice(None, config, [scripted.find(i) for i in s["batch_notice"]])
    if "finalize" in s:
        return guest.finalize(None, config, s["finalize"], s["args"], s["blocks"])
    raise GuestError(f"unknown step {s}")


def check(s, got):
    if "state" in s:
        for job_id, fields in s["state"].items():
            for field, value in fields.items():
                actual = got.get(job_id, {}).get(field)
                if actual != value:
                    return f"job {job_id}: {field} is {json.dumps(actual)}, expected {json.dumps(value)}"
        return None
    want = s["expect"]
    if "check_start" in s and "err_prefix" in want:
        err = got.get("err") or {}
        if err.get("is_error") is True and str(err.get("text", "")).startswith(want["err_prefix"]):
            return None
        return f"expected an error starting {want['err_prefix']!r}, got {json.dumps(got)}"
    if "invoke" in s:
        asked = [w["expect"] for w in s.get("waits", [])]
        if got["waits"] != asked:
            return f"waits {got['waits']} expected {asked}"
        if "text_prefix" in want:
            if not got["text"].startswith(want["text_prefix"]):
                return f"text {got['text']!r} does not start with {want['text_prefix']!r}"
        elif got["text"] != want["text"]:
            return f"text {json.dumps(got['text'])} expected {json.dumps(want['text'])}"
        for key in ("is_error", "value"):
            if got[key] != want[key]:
                return f"{key} {json.dumps(got[key])} expected {json.dumps(want[key])}"
        return None
    if "configure" in s:
        if "ok" in want:
            for k, v in want["ok"].items():
                if (got.get("ok") or {}).get(k) != v:
                    return f"config {k}: got {json.dumps(got)}, expected {json.dumps(v)}"
            return None
        if "err_prefix" in want:
            if not str(got.get("err", "")).startswith(want["err_prefix"]):
                return f"expected an error starting {want['err_prefix']!r}, got {json.dumps(got)}"
            return None
    if got != want:
        return f"got {json.dumps(got, ensure_ascii=False)}, expected {json.dumps(want, ensure_ascii=False)}"
    return None


def run_vector(guest, vector):
    scripted = Scripted(vector)
    guest.backend = scripted
    actual = []
    try:
        config = guest.configure(vector["config"]) if "config" in vector else None
        for n, s in enumerate(vector["steps"]):
            got = step(guest, scripted, config, s)
            actual.append(got)
            why = check(s, got)
            if why:
                return f"step {n}: {why}", actual
    except (GuestError, ValueError) as e:
        return str(e).splitlines()[0], actual
    return None, actual


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--wasm", required=True)
    parser.add_argument("--vectors", default=os.path.join(HERE, "..", "vectors"))
    parser.add_argument("--report")
    args = parser.parse_args()
    with open(args.wasm, "rb") as f:
        wasm = f.read()
    vectors = []
    for path in sorted(glob.glob(os.path.join(args.vectors, "*.json"))):
        with open(path, encoding="utf-8") as f:
            vectors.extend(json.load(f))
    report = open(args.report, "w", encoding="utf-8") if args.report else None
    passed = failed = 0
    guest = Guest(wasm, None)
    for vector in vectors:
        why, actual = run_vector(guest, vector)
        if why is None:
            passed += 1
        else:
            failed += 1
            print(f"FAIL {vector['id']}: {why}")
        if report:
            report.write(json.dumps({"id": vector["id"], "ok": why is None, "failure": why, "actual": actual},
                                    ensure_ascii=False) + "\n")
    if report:
        report.close()
    print(f"python: {passed} passed, {failed} failed")
    sys.exit(0 if failed == 0 else 1)


if __name__ == "__main__":
    main()
