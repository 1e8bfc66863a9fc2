#!/usr/bin/env python3
"""Writes the conformance vectors (conformance/vectors/*.json) from the contract.

Every expected value here is computed by a small, separate implementation of the
contract's rules (../shared/spec/seed-behaviour.md: the string catalogue of
section 4, the capping algorithm of section 5, the delivery rules of section 6 and
the wait rules of section 7), plus the documented differences in the book (docs/src/departures.md). None
of it is taken from what the component prints: the runners compare the component
against these.

    python3 conformance/generate.py          # rewrite the vector files
    python3 conformance/generate.py --check  # fail if they are out of date
"""

import json
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
VECTORS = os.path.join(HERE, "vectors")

EM = "\u2014"
ELLIPSIS = "\u2026"
T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z; any fixed start works.
MAX_TIMER = 2_147_483_647
# How long a terminal job must be quiet at a prompt before a wait ends there
# (README Extensions: terminal).
PROMPT_QUIET_MS = 500

# ---------------------------------------------------------------------------
# Byte primitives (section 5.2)


def head(s, n):
    b = s.encode()
    if len(b) <= n:
        return s
    cut = b[:n]
    # Walk back over continuation bytes to a lead byte; drop an incomplete sequence.
    i = len(cut)
    back = 0
    while i > 0 and back < 3 and (cut[i - 1] & 0xC0) == 0x80:
        i -= 1
        back += 1
    if i > 0:
        lead = cut[i - 1]
        need = 1 if lead < 0x80 else 2 if lead >> 5 == 0b110 else 3 if lead >> 4 == 0b1110 else 4 if lead >> 3 == 0b11110 else 1
        if len(cut) - (i - 1) < need:
            cut = cut[: i - 1]
    return cut.decode()


def tail(s, n):
    b = s.encode()
    if len(b) <= n:
        return s
    if n == 0:
        return ""
    t = b[len(b) - n:]
    while t and (t[0] & 0xC0) == 0x80:
        t = t[1:]
    return t.decode()


def nbytes(s):
    return len(s.encode())


def fit(content, suffix, cap, omitted):
    """Fit with suffix (section 5.3)."""
    if cap is None or nbytes(content + suffix) <= cap:
        return content + suffix
    if content.endswith(omitted[1:]):
        fixed = suffix
    else:
        fixed = omitted + suffix
    if nbytes(fixed) >= cap:
        return tail(fixed, cap)
    return tail(content, cap - nbytes(fixed)) + fixed


# ---------------------------------------------------------------------------
# Profiles A and B (sections 3.1, 3.2, 4.1, 4.2, 4.4)

WORDS = {
    "a": dict(noun="job", output="job_output", list="job_list", kill="job_kill", id="job_id",
              key="job", plugin="tool-jobs", prompt="tool:jobs", bound_error=True),
    "b": dict(noun="task", output="task_output", list="task_list", kill="task_kill", id="task_id",
              key="task", plugin="tool-tasks", prompt="tool:tasks", bound_error=False),
}


def shown_label(label):
    """README: a label longer than 512 bytes is cut at a character boundary and
    ends with an ellipsis, 512 bytes in all."""
    if nbytes(label) <= 512:
        return label
    return head(label, 512 - nbytes(ELLIPSIS)) + ELLIPSIS


def status_line(job):
    if job.get("detail") is not None:
        return f"[status: {job['status']}, {job['detail']}]"
    return f"[status: {job['status']}]"


def public(job):
    out = {"id": job["id"], "kind": job["kind"], "label": shown_label(job["label"]), "status": job["status"]}
    if job.get("detail") is not None:
        out["detail"] = job["detail"]
    out["startedAt"] = job["started_at"]
    if job.get("finished_at") is not None:
        out["finishedAt"] = job["finished_at"]
    return out


def read_text(text, job, cap):
    body = text if text else "(no new output)"
    content = body[:-1] if body.endswith("\n") else body
    return fit(content, "\n" + status_line(job), cap, "\n[output truncated]")


def generic(text, cap):
    return fit(text, "", cap, "\n[result truncated]")


def notice_text(job, p, cap):
    w = WORDS[p]
    prefix = f"background {w['noun']} {job['id']}"
    detail = f" ({job['kind']}: {shown_label(job['label'])}) finished {status_line(job)}"
    action = f"\nDone; {w['output']}."
    omitted = "\n[notice truncated]"
    complete = prefix + detail + f". Read its output with {w['output']}."
    if cap is None or nbytes(complete) <= cap:
        return complete
    fixed = prefix + omitted + action
    if nbytes(fixed) == cap:
        return fixed
    if nbytes(fixed) < cap:
        return prefix + head(detail, cap - nbytes(fixed)) + omitted + action
    compact = prefix + action
    if nbytes(compact) <= cap:
        return compact
    if nbytes(action) < cap:
        return head(prefix, cap - nbytes(action)) + action
    return tail(action, cap)


def summary(job):
    s = f"{job['kind']} {shown_label(job['label'])} {status_line(job)}"
    units = s.encode("utf-16-le")
    if len(units) // 2 <= 120:
        return s
    return units[: 119 * 2].decode("utf-16-le") + ELLIPSIS


def notice(job, p):
    w = WORDS[p]
    cap = job.get("output_limit_bytes")
    return {
        "text": notice_text(job, p, cap),
        "summary": summary(job) if p == "a" else None,
        "plugin": w["plugin"],
        "form": "notice" if p == "a" else None,
    }


def js_number(x):
    if isinstance(x, float) and x.is_integer():
        return str(int(x))
    return json.dumps(x)


def err(msg, cap=None):
    return {"text": generic("Error: " + msg, cap), "is_error": True, "value": None}


# ---------------------------------------------------------------------------
# Profile C (sections 3.3, 4.5 and the README's differences)


def go_duration(ms):
    if ms == 0:
        return "0s"
    if ms < 1000:
        return f"{ms}ms"
    h, rem = divmod(ms, 3_600_000)
    m, rem = divmod(rem, 60_000)
    s, milli = divmod(rem, 1000)
    sec = f"{s}" if milli == 0 else f"{s}.{milli:03d}".rstrip("0")
    if h:
        return f"{h}h{m}m{sec}s"
    if m:
        return f"{m}m{sec}s"
    return f"{sec}s"


C_STATE = {"running": "running", "stopping": "running", "completed": "succeeded",
           "killed": "cancelled", "failed": "failed"}


def go_truncate_bytes(text, max_bytes):
    """Go's truncateBytes (agentcore/tool.go): the head the short marker leaves
    of the bound, backed off to a rune start, then the marker; all of the bound
    when the marker is not shorter than it."""
    if nbytes(text) <= max_bytes:
        return text
    marker = "\n" + ELLIPSIS + "[truncated]"
    budget = max_bytes - nbytes(marker)
    if budget <= 0:
        budget = max_bytes
    return head(text, budget) + marker


def c_truncate(text, max_bytes):
    """Go's truncateMiddle: the head takes two thirds of the budget left after a
    64-byte reserve, the tail what the head left; below 2 bytes, truncateBytes."""
    if nbytes(text) <= max_bytes:
        return text
    budget = max_bytes - 64
    if budget < 2:
        return go_truncate_bytes(text, max_bytes)
    h = head(text, budget * 2 // 3)
    t = tail(text, budget - nbytes(h))
    omitted = nbytes(text) - nbytes(h) - nbytes(t)
    return f"{h}\n{ELLIPSIS}[{omitted} bytes truncated]{ELLIPSIS}\n{t}"


def c_result(job, max_bytes):
    text = c_truncate(job.get("output", ""), max_bytes)
    if job.get("detail") is not None:
        if text.endswith("\n"):
            text = text[:-1]
        if text:
            text += "\n"
        text += f"[{job['detail']}]"
    return text


def c_status(job, now, max_bytes):
    end = job.get("finished_at") or now
    text = f"job {job['id']} ({job['kind']}) {EM} {C_STATE[job['status']]} after {go_duration(end - job['started_at'])}"
    if job["status"] == "completed":
        r = c_result(job, max_bytes)
        text += "\n" + (r if r else "(no output)")
    elif job["status"] in ("failed", "killed") and job.get("detail") is not None:
        text += "\n" + c_truncate(job["detail"], max_bytes)
    return text


def c_line(job, max_bytes, with_result=True):
    line = f"- {job['id']} ({job['kind']}, {C_STATE[job['status']]}, {go_duration(job['finished_at'] - job['started_at'])})"
    if job["status"] == "failed":
        line += ": " + (c_truncate(job["detail"], max_bytes) if job.get("detail") is not None else "")
    elif job["status"] == "completed" and with_result:
        r = c_result(job, max_bytes)
        if nbytes(r) <= 2048:
            line += ":\n" + r
        else:
            line += f": {nbytes(r)} bytes of output {EM} call job_status with id \"{job['id']}\" to read it."
    return line + "\n"


def c_text(text):
    return {"text": text, "is_error": False, "value": None}


def c_err(msg):
    return {"text": "error: " + msg, "is_error": True, "value": None}


# ---------------------------------------------------------------------------
# Jobs and vectors


def job(id_, status="running", *, kind=None, label="make test", detail=None, started=T0,
        finished=None, cap=None, reported=False, owner="caller", pending=None, output=None,
        cancel_error=None):
    kind = kind or id_.rsplit("-", 1)[0]
    terminal = status in ("completed", "killed", "failed")
    if terminal and finished is None:
        finished = started + 1500
    j = {"id": id_, "kind": kind, "label": label, "status": status, "detail": detail,
         "started_at": started, "finished_at": finished if terminal else None,
         "output_limit_bytes": cap, "reported": reported, "owner": owner}
    if pending is not None:
        j["pending"] = pending
    if output is not None:
        j["output"] = output
    if cancel_error is not None:
        j["cancel_error"] = cancel_error
    return j


ALL = {}


def vec(family, id_, covers, steps, *, config=None, jobs=(), now=T0 + 5000):
    v = {"id": id_, "covers": covers}
    if config is not None:
        v["config"] = config
    v["now_ms"] = now
    v["jobs"] = list(jobs)
    v["steps"] = steps
    ALL.setdefault(family, []).append(v)


def cfg(p, **extra):
    d = {"profile": p}
    d.update(extra)
    return json.dumps(d)


def invoke(tool, args, expect, waits=None):
    s = {"invoke": tool, "args": args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)}
    if waits is not None:
        s["waits"] = waits
    s["expect"] = expect
    return s


def ok_read(text, after, cap=None, p="a"):
    return {"text": read_text(text, after, cap), "is_error": False,
            "value": {"text": text, WORDS[p]["key"]: public(after)}}


def settled(j, **changes):
    out = dict(j)
    out.update(changes)
    if out["status"] in ("completed", "killed", "failed"):
        out.setdefault("finished_at", None)
        if out["finished_at"] is None:
            out["finished_at"] = out["started_at"] + 1500
        out["reported"] = True
    return out


# ---------------------------------------------------------------------------
# Families

STATUSES = ["running", "stopping", "completed", "killed", "failed"]
DETAILS = {"running": None, "stopping": None, "completed": "exit code: 0",
           "killed": "signal: SIGTERM", "failed": "max-tokens"}


def reads():
    bodies = [("", "empty"), ("line\n", "newline"), ("two\nlines", "no-newline")]
    for p in "ab":
        w = WORDS[p]
        for status in STATUSES:
            for detail in (None, DETAILS[status]) if DETAILS[status] else (None,):
                for body, name in bodies:
                    j = job("bash-1", status, detail=detail, pending=body)
                    after = settled(j) if status in ("completed", "killed", "failed") else j
                    vid = f"{p}-read-{status}{'-detail' if detail else ''}-{name}"
                    vec("reads", vid, "4.1 S1-S4, 5.4", [
                        invoke(w["output"], {w["id"]: "bash-1"}, ok_read(body, after, p=p)),
                        {"state": {"bash-1": {"reported": status in ("completed", "killed", "failed")}}},
                        invoke(w["output"], {w["id"]: "bash-1"}, ok_read("", after, p=p)),
                    ], config=cfg(p), jobs=[j])


def capped_reads():
    cases = [
        ("han", "\u754c" * 100, 48), ("empty", "", 64), ("line", "line\n", 64),
        ("a1000", "a" * 1000, 64), ("reuse", "abc\n[output truncated]", 30),
        ("tiny", "a" * 100, 8), ("suffix-exact", "abc", 20), ("multibyte-tail", "\u00e9" * 50, 40),
        ("fits", "x" * 10, 1000), ("cap1", "hello", 1),
    ]
    for p in "ab":
        w = WORDS[p]
        for name, body, cap in cases:
            j = job("pty-send-1", "running", cap=cap, pending=body)
            vec("caps", f"{p}-capped-read-{name}", "5.3, 5.4, 5.8", [
                invoke(w["output"], {w["id"]: "pty-send-1"}, ok_read(body, j, cap, p)),
            ], config=cfg(p), jobs=[j])
        # The generic path: kill results and errors under a cap.
        for cap in (8, 30, 64):
            j = job("bash-3", "running", cap=cap)
            after = dict(j, status="stopping", reported=True)
            vec("caps", f"{p}-capped-kill-{cap}", "5.5", [
                invoke(w["kill"], {w["id"]: "bash-3"}, {
                    "text": generic(f"requested cancellation of {w['noun']} bash-3", cap),
                    "is_error": False,
                    "value": {"outcome": "cancellation-requested", w["key"]: public(after)}}),
            ], config=cfg(p), jobs=[j])
        j = job("bash-4", "running", cap=64, cancel_error="x" * 300)
        vec("caps", f"{p}-capped-cancel-failure", "5.5, 9.1 (20)", [
            invoke(w["kill"], {w["id"]: "bash-4"}, err("x" * 300, 64)),
            {"state": {"bash-4": {"status": "running", "reported": False}}},
        ], config=cfg(p), jobs=[j])
        j = job("bash-5", "running", cap=40)
        vec("caps", f"{p}-capped-argument-error", "5.1: a known id's cap applies to its errors", [
            invoke(w["output"], {w["id"]: "bash-5", "wait": "yes"},
                   err('invalid arguments: "wait" must be a boolean', 40)),
        ], config=cfg(p), jobs=[j])
        vec("caps", f"{p}-no-cap-for-unknown-id", "5.1: no cap without a visible job", [
            invoke(w["output"], {w["id"]: "bash-" + "9" * 80}, err(f"unknown {w['noun']} bash-{'9' * 80}")),
        ], config=cfg(p), jobs=[job("bash-6", cap=8)])


def notices():
    ids = [("bash-1", "bash", "pnpm test"), ("subagent-1", "subagent", "x" * 1000),
           ("pty-send-100", "pty-send", "sess: ls"), ("subagent-2", "subagent", "x" * 1000),
           ("pty-send-2", "pty-send", "x" * 100)]
    caps = [None, 8, 16, 32, 40, 52, 61, 64, 80, 100, 140, 400]
    for p in "ab":
        for id_, kind, label in ids:
            for cap in caps:
                detail = "d" * 1000 if label == "x" * 1000 else "exit code: 0"
                j = job(id_, "completed", kind=kind, label=label, detail=detail, cap=cap)
                vec("notices", f"{p}-notice-{id_}-{cap or 'uncapped'}", "4.1 S9-S19, 5.6, 5.8",
                    [{"completion_notice": id_, "expect": notice(j, p)}], config=cfg(p), jobs=[j])
        for status in ("completed", "killed", "failed"):
            j = job("bash-7", status, detail=DETAILS[status])
            vec("notices", f"{p}-notice-status-{status}", "4.1 S9", [
                {"completion_notice": "bash-7", "expect": notice(j, p)}], config=cfg(p), jobs=[j])
    for name, label in [("summary-short", "go test ./..."), ("summary-119", "y" * 80),
                        ("summary-long", "z" * 300), ("summary-wide", "\u754c" * 150)]:
        j = job("bash-8", "completed", label=label, detail="exit code: 2")
        vec("notices", f"a-notice-{name}", "4.1 S19 (120 UTF-16 units)", [
            {"completion_notice": "bash-8", "expect": notice(j, "a")}], config=cfg("a"), jobs=[j])


def delivery():
    for mode in ("wakeup", "quiet"):
        for max_wakes in (1, 3):
            for status in ("idle", "running"):
                for spent in sorted({0, max_wakes - 1, max_wakes}):
                    j = job("bash-1", "completed", detail="exit code: 0")
                    wake = mode == "wakeup" and status == "idle" and spent < max_wakes
                    expect = {"lane": "followup" if wake else "inject", "notice": notice(j, "a")}
                    vec("delivery", f"a-deliver-{mode}-max{max_wakes}-{status}-spent{spent}", "6.2, 6.3", [
                        {"deliver": "bash-1", "owner": {"status": status, "wakes_spent": spent},
                         "expect": expect}],
                        config=cfg("a", completionDelivery=mode, maxConsecutiveWakes=max_wakes), jobs=[j])
    for p in "ab":
        j = job("bash-1", "completed", detail="exit code: 0", reported=True)
        vec("delivery", f"{p}-deliver-reported", "6.2: a reported job gets no notice", [
            {"deliver": "bash-1", "owner": {"status": "idle", "wakes_spent": 0}, "expect": None}],
            config=cfg(p), jobs=[j])
        j = job("bash-1", "completed", detail="exit code: 0", owner="none")
        vec("delivery", f"{p}-deliver-unowned", "6.2: an unowned job gets no notice", [
            {"deliver": "bash-1", "owner": None, "expect": None}], config=cfg(p), jobs=[j])
    for status in ("idle", "running"):
        j = job("bash-1", "killed", detail="signal: SIGTERM")
        vec("delivery", f"b-deliver-{status}-injects", "6.6: B never wakes", [
            {"deliver": "bash-1", "owner": {"status": status, "wakes_spent": 0},
             "expect": {"lane": "inject", "notice": notice(j, "b")}}], config=cfg("b"), jobs=[j])
    j = job("bash-1", "completed", detail="exit code: 0", output="ok\n")
    vec("delivery", "c-deliver-never-pushes", "6.7: C pulls its notices", [
        {"deliver": "bash-1", "owner": {"status": "idle", "wakes_spent": 0}, "expect": None}],
        config=cfg("c"), jobs=[j])
    for p in "ab":
        vec("delivery", f"{p}-batch-notice-is-none", "WIT notices.batch-notice: none when the profile pushes", [
            {"batch_notice": ["bash-1"], "expect": None}], config=cfg(p), jobs=[j])


def errors():
    for p in "ab":
        w = WORDS[p]
        n = w["noun"]
        jobs_ = [job("bash-1", "running", pending="x"), job("bash-2", "running", owner="other")]
        # A names the timer bound; B keeps the older words (4.2).
        bound = " no greater than 2147483647," if w["bound_error"] else ","

        table = [
            ("unknown-output", w["output"], {w["id"]: "bash-99"}, err(f"unknown {n} bash-99")),
            ("unknown-kill", w["kill"], {w["id"]: "bash-99"}, err(f"unknown {n} bash-99")),
            ("foreign-output", w["output"], {w["id"]: "bash-2"}, err(f"{n} bash-2 belongs to another session")),
            ("foreign-kill", w["kill"], {w["id"]: "bash-2"}, err(f"{n} bash-2 belongs to another session")),
            ("empty-id-output", w["output"], {w["id"]: ""},
             err(f'invalid {w["id"]}: expected a non-empty string, got ""')),
            ("empty-id-kill", w["kill"], {w["id"]: ""},
             err(f'invalid {w["id"]}: expected a non-empty string, got ""')),
            ("missing-id", w["output"], {}, err(f'invalid arguments: missing required property "{w["id"]}"')),
            ("missing-id-kill", w["kill"], {"reason": "x"},
             err(f'invalid arguments: missing required property "{w["id"]}"')),
            ("wait-not-boolean", w["output"], {w["id"]: "bash-1", "wait": "yes"},
             err('invalid arguments: "wait" must be a boolean')),
            ("id-not-string", w["output"], {w["id"]: 7}, err(f'invalid arguments: "{w["id"]}" must be a string')),
            ("timeout-not-number", w["output"], {w["id"]: "bash-1", "wait": True, "timeout_ms": "10"},
             err('invalid arguments: "timeout_ms" must be a number')),
            ("reason-not-string", w["kill"], {w["id"]: "bash-1", "reason": 5},
             err('invalid arguments: "reason" must be a string')),
        ]
        for value in (0, -5, -0.5):
            table.append((f"timeout-{js_number(value)}", w["output"],
                          {w["id"]: "bash-1", "wait": True, "timeout_ms": value},
                          err(f"invalid wait timeout: expected a positive number of milliseconds{bound} got {js_number(value)}")))
        table.append(("timeout-unknown-id-first", w["output"],
                      {w["id"]: "bash-99", "wait": True, "timeout_ms": 0}, err(f"unknown {n} bash-99")))
        table.append(("timeout-foreign-id-first", w["output"],
                      {w["id"]: "bash-2", "wait": True, "timeout_ms": -1},
                      err(f"{n} bash-2 belongs to another session")))
        for name, tool, args, expect in table:
            vec("errors", f"{p}-error-{name}", "4.2, 7.1, 7.2", [
                invoke(tool, args, expect),
                {"state": {"bash-1": {"status": "running", "reported": False}}},
            ], config=cfg(p), jobs=jobs_)
        vec("errors", f"{p}-error-unknown-tool", "host convention", [
            invoke(f"{n}_frobnicate", {}, err(f'unknown tool "{n}_frobnicate"'))], config=cfg(p), jobs=jobs_)
        # Above the timer bound: only reachable with a cap configured above it.
        vec("errors", f"{p}-error-timeout-above-timer", "4.2, 7.2 (3), 12 note 13", [
            invoke(w["output"], {w["id"]: "bash-1", "wait": True, "timeout_ms": 2500000000},
                   err(f"invalid wait timeout: expected a positive number of milliseconds{bound} got 2500000000")),
        ], config=cfg(p, waitTimeoutMs=10, maxWaitTimeoutMs=3000000000), jobs=jobs_)
        j = job("bash-3", "running", cancel_error="cancel exploded")
        vec("errors", f"{p}-error-cancel-throws", "4.2: the producer's message; state untouched", [
            invoke(w["kill"], {w["id"]: "bash-3"}, err("cancel exploded")),
            {"state": {"bash-3": {"status": "running", "reported": False}}},
        ], config=cfg(p), jobs=[j])


def waits():
    for p in "ab":
        w = WORDS[p]
        j = job("bash-1", "running", pending="")
        done = settled(j, status="completed", detail="exit code: 0", finished_at=T0 + 3000)
        cases = [
            # (name, config, args, expected timeout, then, after)
            ("default", cfg(p), {w["id"]: "bash-1", "wait": True}, 30000, "settle", done),
            ("clamped", cfg(p, waitTimeoutMs=10, maxWaitTimeoutMs=20),
             {w["id"]: "bash-1", "wait": True, "timeout_ms": 600000}, 20, "stay", j),
            ("asked", cfg(p), {w["id"]: "bash-1", "wait": True, "timeout_ms": 1500}, 1500, "settle", done),
            ("fraction", cfg(p), {w["id"]: "bash-1", "wait": True, "timeout_ms": 0.25}, 1, "stay", j),
            ("exact-bound", cfg(p, maxWaitTimeoutMs=3000000000),
             {w["id"]: "bash-1", "wait": True, "timeout_ms": MAX_TIMER}, MAX_TIMER, "settle", done),
            ("config-fraction", cfg(p, waitTimeoutMs=2.5, maxWaitTimeoutMs=2.5),
             {w["id"]: "bash-1", "wait": True}, 3, "stay", j),
        ]
        for name, config, args, timeout, then, after in cases:
            if then == "settle":
                then_v = {"settle": {"status": "completed", "detail": "exit code: 0",
                                     "finished_at": T0 + 3000, "pending": "built\n"}}
                expect = ok_read("built\n", after, p=p)
            else:
                then_v = {"stay": True}
                expect = ok_read("", after, p=p)
            vec("waits", f"{p}-wait-{name}", "7.1, 7.2; WIT wait-request", [
                invoke(w["output"], args, expect,
                       waits=[{"expect": {"job_id": "bash-1", "timeout_ms": timeout}, "then": then_v}]),
                {"state": {"bash-1": {"reported": then == "settle"}}},
            ], config=config, jobs=[j])
        for name, args in [("wait-false", {w["id"]: "bash-1", "wait": False, "timeout_ms": 5}),
                           ("wait-absent", {w["id"]: "bash-1", "timeout_ms": 5})]:
            vec("waits", f"{p}-wait-not-requested-{name}", "7.1 (5): timeout_ms ignored without wait: true", [
                invoke(w["output"], args, ok_read("", j, p=p))], config=cfg(p), jobs=[j])
        vec("waits", f"{p}-wait-aborted", "4.2, 7.2: wait aborted", [
            invoke(w["output"], {w["id"]: "bash-1", "wait": True}, err("wait aborted"),
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 30000},
                           "then": {"error": {"wait-aborted": None}}}]),
            {"state": {"bash-1": {"status": "running", "reported": False}}},
        ], config=cfg(p), jobs=[j])
        t = job("bash-2", "completed", detail="exit code: 1", pending="tail\n")
        vec("waits", f"{p}-wait-on-terminal", "7.2 (4, 6)", [
            invoke(w["output"], {w["id"]: "bash-2", "wait": True}, ok_read("tail\n", settled(t), p=p),
                   waits=[{"expect": {"job_id": "bash-2", "timeout_ms": 30000}, "then": {"stay": True}}]),
            {"state": {"bash-2": {"reported": True}}},
        ], config=cfg(p), jobs=[t])
        g = job("bash-3", "running", pending="")
        vec("waits", f"{p}-wait-vanished", "7.2 (1): an id removed meanwhile", [
            invoke(w["output"], {w["id"]: "bash-3", "wait": True}, err(f"unknown {w['noun']} bash-3"),
                   waits=[{"expect": {"job_id": "bash-3", "timeout_ms": 30000},
                           "then": {"error": {"unknown-job": "bash-3"}}}]),
        ], config=cfg(p), jobs=[g])


def lists_and_kills():
    for p in "ab":
        w = WORDS[p]
        vec("lists", f"{p}-list-empty", "4.1 S6", [
            invoke(w["list"], {}, {"text": f"(no background {w['noun']}s)", "is_error": False, "value": []}),
        ], config=cfg(p))
        js = [job("bash-1", "running", label="npm run dev"),
              job("subagent-1", "completed", label="research", detail="end"),
              job("bash-2", "killed", label="sleep 100", detail="signal: SIGTERM"),
              job("bash-3", "running", owner="other"),
              job("bash-4", "failed", label="unowned one", owner="none", detail="boom")]
        visible = [x for x in js if x["owner"] != "other"]
        text = "\n".join(f"{x['id']} [{x['kind']}] {x['status']} {EM} {shown_label(x['label'])}" for x in visible)
        vec("lists", f"{p}-list-rows", "4.1 S5: registration order, no detail; 2.7 visibility", [
            invoke(w["list"], {}, {"text": text, "is_error": False, "value": [public(x) for x in visible]}),
            {"state": {"subagent-1": {"reported": False}}},
        ], config=cfg(p), jobs=js)
        vec("lists", f"{p}-list-ignores-arguments", "3.1: open parameter objects", [
            invoke(w["list"], {"extra": 1}, {"text": text, "is_error": False,
                                             "value": [public(x) for x in visible]}),
        ], config=cfg(p), jobs=js)
        j = job("bash-1", "running", label="make")
        after = dict(j, status="stopping", reported=True)
        vec("lists", f"{p}-kill-live", "4.1 S7; 6.4", [
            invoke(w["kill"], {w["id"]: "bash-1", "reason": "not needed"}, {
                "text": f"requested cancellation of {w['noun']} bash-1", "is_error": False,
                "value": {"outcome": "cancellation-requested", w["key"]: public(after)}}),
            {"state": {"bash-1": {"status": "stopping", "reported": True}}},
        ], config=cfg(p), jobs=[j])
        for status in ("completed", "killed", "failed"):
            for detail in (None, DETAILS[status]):
                j = job("bash-1", status, detail=detail)
                vec("lists", f"{p}-kill-{status}{'-detail' if detail else ''}", "4.1 S8", [
                    invoke(w["kill"], {w["id"]: "bash-1"}, {
                        "text": f"{w['noun']} bash-1 had already finished {status_line(j)}",
                        "is_error": False,
                        "value": {"outcome": "already-finished", w["key"]: public(j)}}),
                    {"state": {"bash-1": {"reported": True}}},
                ], config=cfg(p), jobs=[j])
        # README: labels over 512 bytes are cut; lists over 200 rows say how many they left out.
        long = job("bash-1", "running", label="\u754c" * 200)
        vec("lists", f"{p}-list-long-label", "README: 512-byte labels", [
            invoke(w["list"], {}, {"text": f"bash-1 [bash] running {EM} {shown_label(long['label'])}",
                                   "is_error": False, "value": [public(long)]})], config=cfg(p), jobs=[long])
        many = [job(f"bash-{i}", "completed", label=f"job {i}", detail="exit code: 0", started=T0 + i,
                    finished=T0 + i + 1) for i in range(1, 206)]
        many[2] = job("bash-3", "running", label="job 3", started=T0 + 3)
        # Live jobs first, then the newest finished, shown in registration order.
        kept = [x for x in many if x["status"] == "running"] + [x for x in many if x["status"] != "running"][-199:]
        kept.sort(key=lambda x: x["started_at"])
        text = "\n".join(f"{x['id']} [{x['kind']}] {x['status']} {EM} {x['label']}" for x in kept)
        text += f"\n(5 older {w['noun']}s not shown)"
        vec("lists", f"{p}-list-bounded", "README: at most 200 rows", [
            invoke(w["list"], {}, {"text": text, "is_error": False, "value": [public(x) for x in kept]})],
            config=cfg(p), jobs=many)
        # Final-output jobs: empty while live, the result once terminal (idempotent).
        j = job("subagent-3", "running", label="summarize", pending="")
        vec("lists", f"{p}-final-output-live", "2.4", [
            invoke(w["output"], {w["id"]: "subagent-3"}, ok_read("", j, p=p))], config=cfg(p), jobs=[j])


def ann(title, read_only, destructive, idempotent, open_world=False):
    """MCP tool annotations as a host shows them (README: Use it from your harness)."""
    return {"title": title, "readOnlyHint": read_only, "destructiveHint": destructive,
            "idempotentHint": idempotent, "openWorldHint": open_world}


def ann_reads(title, idempotent):
    """A tool that only looks at jobs: a consuming read is not idempotent."""
    return ann(title, True, False, idempotent)


def ann_acts(title, destructive, idempotent):
    """A tool that acts on the jobs it names and nothing else."""
    return ann(title, False, destructive, idempotent)


def annotations_with_extensions(p):
    """Every guest tool's annotations with all extensions on (README table)."""
    if p == "c":
        n, idp = "job", "id"
        base = [("job_list", ann_reads("List background jobs", True)),
                ("job_status", ann_reads("Show a background job's status", True)),
                ("job_wait", ann_reads("Wait for a background job", True)),
                ("job_cancel", ann_acts("Cancel a background job", True, True))]
        prefix = "job"
    else:
        w = WORDS[p]
        n = w["noun"]
        base = [(w["output"], ann_reads(f"Read background {n} output", False)),
                (w["list"], ann_reads(f"List background {n}s", True)),
                (w["kill"], ann_acts(f"Stop a background {n}", True, True))]
        prefix = n
    return [{"name": name, "annotations": a} for name, a in base + [
        (f"{prefix}_input", ann_acts(f"Write to a background {n}'s input", True, False)),
        (f"{prefix}_signal", ann_acts(f"Signal a background {n}", True, False)),
        (f"{prefix}_log", ann_reads(f"Page a background {n}'s output", True)),
        (f"{prefix}_resize", ann_acts(f"Resize a background {n}'s terminal", False, True)),
    ]]


def definitions():
    def pub_schema():
        return {"type": "object", "properties": {
            "id": {"type": "string"}, "kind": {"type": "string"}, "label": {"type": "string"},
            "status": {"type": "string", "enum": STATUSES}, "detail": {"type": "string"},
            "startedAt": {"type": "integer"}, "finishedAt": {"type": "integer"}},
            "required": ["id", "kind", "label", "status", "startedAt"], "additionalProperties": False}

    for p in "ab":
        w = WORDS[p]
        n, N = w["noun"], w["noun"].capitalize()
        id_desc = f"{N} id returned by the tool that started the background work."
        defs = [
            {"name": w["output"],
             "description": f"Read a background {n}. Stream {n}s return only output since the previous read; final-output {n}s return their result after settlement. Every response ends with `[status: ...]`. Reads are non-blocking unless `wait: true`, which waits up to the configured cap.",
             "input_schema": {"type": "object", "properties": {
                 w["id"]: {"type": "string", "description": id_desc},
                 "wait": {"type": "boolean", "description": f"Block until the {n} reaches a terminal status or the timeout expires. A timed-out wait returns [status: running] and leaves the {n} alive."},
                 "timeout_ms": {"type": "number", "description": "Max wait in milliseconds (only meaningful with wait: true). Defaults to the configured wait timeout; capped by the configured maximum."}},
                 "required": [w["id"]]},
             "output_schema": {"type": "object", "properties": {"text": {"type": "string"}, w["key"]: pub_schema()},
                               "required": ["text", w["key"]], "additionalProperties": False},
             "annotations": ann_reads(f"Read background {n} output", False)},
            {"name": w["list"],
             "description": f"List your background {n}s (running and finished) with their ids, kinds, and statuses.",
             "input_schema": {"type": "object", "properties": {}},
             "output_schema": {"type": "array", "items": pub_schema()},
             "annotations": ann_reads(f"List background {n}s", True)},
            {"name": w["kill"],
             "description": f"Request cancellation of a running background {n} by {n} id. Returns immediately; the {n} settles as killed once its work actually stops.",
             "input_schema": {"type": "object", "properties": {
                 w["id"]: {"type": "string", "description": id_desc},
                 "reason": {"type": "string", "description": f"Optional short reason, recorded in the log and forwarded to the {n}."}},
                 "required": [w["id"]]},
             "output_schema": {"type": "object", "properties": {
                 "outcome": {"type": "string", "enum": ["cancellation-requested", "already-finished"]},
                 w["key"]: pub_schema()}, "required": ["outcome", w["key"]], "additionalProperties": False},
             "annotations": ann_acts(f"Stop a background {n}", True, True)},
        ]
        vec("definitions", f"{p}-tool-definitions", "3.1, 3.2, 2.6", [{"tool_definitions": {}, "expect": defs}],
            config=cfg(p))
        prompt = (f"Track every background {n} id you start. You are notified in-session when a {n} finishes {EM} do not busy-poll or sleep on one; keep working on independent steps and do not duplicate a running {n}'s work. Before giving a final answer, collect every still-relevant {n} with {w['output']} (set wait: true only when you are genuinely blocked on it), and {w['kill']} {n}s that stopped mattering.")
        vec("definitions", f"{p}-system-prompt", "4.1, 4.4", [
            {"system_prompt": {}, "expect": {"name": w["prompt"], "order": 106, "text": prompt}}], config=cfg(p))
        cards = [
            (w["output"], {w["id"]: "bash-1"}, {"title": f"Read output from background {n} bash-1", "kind": "read", "raw_input": "bash-1"}),
            (w["list"], {}, {"title": f"List background {n}s", "kind": "read", "raw_input": None}),
            (w["kill"], {w["id"]: "bash-1"}, {"title": f"Kill background {n} bash-1", "kind": "execute", "raw_input": "bash-1"}),
            ("no_such_tool", {}, None),
        ]
        for tool, args, card in cards:
            vec("definitions", f"{p}-card-{tool}", "3.1 UI presentation", [
                {"describe_call": tool, "args": json.dumps(args), "expect": card}], config=cfg(p))
    id_ = {"type": "string", "description": "The job id."}
    cdefs = [
        {"name": "job_list", "description": f"List the background jobs this session started, newest first, with their state and duration. Jobs still running when you finish your answer are cancelled {EM} wait for the ones whose results you need.",
         "input_schema": {"type": "object", "properties": {}, "required": []}, "output_schema": None,
         "annotations": ann_reads("List background jobs", True)},
        {"name": "job_status", "description": "Read one background job: its state, and its full output once it has finished.",
         "input_schema": {"type": "object", "properties": {"id": id_}, "required": ["id"]}, "output_schema": None,
         "annotations": ann_reads("Show a background job's status", True)},
        {"name": "job_wait", "description": f"Block until a background job finishes, then return its result. Bounded by a timeout {EM} if it returns while the job is still running, the job keeps going and you can wait again or continue with other work.",
         "input_schema": {"type": "object", "properties": {"id": id_, "timeout_seconds": {"type": "integer", "description": "How long to wait before returning with the job still running."}}, "required": ["id"]},
         "output_schema": None, "annotations": ann_reads("Wait for a background job", True)},
        {"name": "job_cancel", "description": "Cancel a running background job.",
         "input_schema": {"type": "object", "properties": {"id": id_}, "required": ["id"]}, "output_schema": None,
         "annotations": ann_acts("Cancel a background job", True, True)},
    ]
    vec("definitions", "c-tool-definitions", "3.3", [{"tool_definitions": {}, "expect": cdefs}], config=cfg("c"))
    for p in "abc":
        vec("definitions", f"{p}-tool-annotations-all-extensions", "README: tool annotations", [
            {"tool_annotations": {}, "expect": annotations_with_extensions(p)}],
            config=cfg(p, extensions=True))
    vec("definitions", "c-system-prompt", "README: profile C has no prompt section", [
        {"system_prompt": {}, "expect": None}], config=cfg("c"))


def configs():
    good = [
        ("a-defaults", "{}", dict(profile="a", wait_timeout_ms=30000, max_wait_timeout_ms=600000,
                                  completion_delivery="wakeup", max_consecutive_wakes=3)),
        ("a-quiet", '{"completionDelivery":"quiet","maxConsecutiveWakes":1}',
         dict(profile="a", wait_timeout_ms=30000, max_wait_timeout_ms=600000, completion_delivery="quiet",
              max_consecutive_wakes=1)),
        ("a-waits", '{"waitTimeoutMs":10,"maxWaitTimeoutMs":20}',
         dict(profile="a", wait_timeout_ms=10, max_wait_timeout_ms=20)),
        ("a-equal-waits", '{"waitTimeoutMs":50,"maxWaitTimeoutMs":50}',
         dict(wait_timeout_ms=50, max_wait_timeout_ms=50)),
        ("a-fraction-rounds-up", '{"waitTimeoutMs":1.2,"maxWaitTimeoutMs":1.5}',
         dict(wait_timeout_ms=2, max_wait_timeout_ms=2)),
        ("b-defaults", '{"profile":"b"}', dict(profile="b", wait_timeout_ms=30000, max_wait_timeout_ms=600000)),
        ("c-defaults", '{"profile":"c"}', dict(profile="c", max_result_bytes=24576, wait_timeout_ms=120000,
                                              max_wait_timeout_ms=120000, suppress_completion_notice=False)),
        ("c-zero-means-default", '{"profile":"c","maxResultBytes":0,"maxWaitSeconds":0}',
         dict(max_result_bytes=24576, max_wait_timeout_ms=120000)),
        ("c-set", '{"profile":"c","maxResultBytes":200,"maxWaitSeconds":5,"suppressCompletionNotice":true}',
         dict(max_result_bytes=200, max_wait_timeout_ms=5000, suppress_completion_notice=True)),
        ("c-longest-wait", '{"profile":"c","maxWaitSeconds":2147483}', dict(max_wait_timeout_ms=2147483000)),
    ]
    for name, text, fields in good:
        vec("configs", f"config-{name}", "3.1 config, 7.3; WIT config (whole ms)",
            [{"configure": text, "expect": {"ok": fields}}])
    bad = [
        # JSON.parse reads 1e400 as Infinity: the contract's words for that wake limit.
        ("a-infinite-wakes", '{"maxConsecutiveWakes": 1e400}',
         "tool-jobs: maxConsecutiveWakes (Infinity) must be a whole number of turns"),
        ("b-infinite-wait", '{"profile":"b","waitTimeoutMs":-1e999}',
         "tool-tasks: waitTimeoutMs (-Infinity) is not a finite number"),
        # README: timeouts that host and guest cannot hold as whole ms are refused.
        ("a-cap-beyond-whole-ms", '{"maxWaitTimeoutMs":1e22}',
         "tool-jobs: maxWaitTimeoutMs (1e+22) must be at most 9007199254740991"),
        ("a-default-above-cap", '{"waitTimeoutMs":100,"maxWaitTimeoutMs":50}',
         "tool-jobs: waitTimeoutMs (100) exceeds maxWaitTimeoutMs (50)"),
        ("a-fraction-above-cap", '{"waitTimeoutMs":1.5,"maxWaitTimeoutMs":1.2}',
         "tool-jobs: waitTimeoutMs (1.5) exceeds maxWaitTimeoutMs (1.2)"),
        ("b-default-above-cap", '{"profile":"b","waitTimeoutMs":100,"maxWaitTimeoutMs":50}',
         "tool-tasks: waitTimeoutMs (100) exceeds maxWaitTimeoutMs (50)"),
        ("a-wakes-fraction", '{"maxConsecutiveWakes":2.5}',
         "tool-jobs: maxConsecutiveWakes (2.5) must be a whole number of turns"),
        ("c-wait-above-timer", '{"profile":"c","maxWaitSeconds":2147484}',
         "jobs: maxWaitSeconds (2147484) exceeds the longest wait a timer holds (2147483)"),
    ]
    for name, text, message in bad:
        vec("configs", f"config-{name}", "4.2 load errors, 7.3", [{"configure": text, "expect": {"err": message}}])
    # Schema rejections: the exact message is the host's convention; the prefix is the contract's.
    for name, text, prefix in [
        ("a-wakes-zero", '{"maxConsecutiveWakes":0}', "tool-jobs: "),
        ("a-loud", '{"completionDelivery":"loud"}', "tool-jobs: "),
        ("a-wait-zero", '{"waitTimeoutMs":0}', "tool-jobs: "),
        ("b-unknown-key", '{"profile":"b","completionDelivery":"quiet"}', "tool-tasks: "),
        ("c-fraction-seconds", '{"profile":"c","maxWaitSeconds":1.5}', "jobs: "),
    ]:
        vec("configs", f"config-{name}", "7.3 schema checks", [{"configure": text, "expect": {"err_prefix": prefix}}])


def finalizes():
    for p in "ab":
        w = WORDS[p]
        j = job("bash-1", "running", cap=64)
        long = "p" * 1000
        cases = [
            ("policy-text", [{"text": long}], [{"text": generic(long, 64)}]),
            ("short-text", [{"text": "denied"}], [{"text": "denied"}]),
            ("two-blocks", [{"text": long}, {"text": long}], [{"text": long}, {"text": long}]),
            ("other-block", [{"other": '{"type":"reasoning"}'}], [{"other": '{"type":"reasoning"}'}]),
        ]
        for name, blocks, expect in cases:
            vec("finalize", f"{p}-finalize-{name}", "5.1, 5.5, 9.1 (11-21)", [
                {"finalize": w["output"], "args": json.dumps({w["id"]: "bash-1"}), "blocks": blocks,
                 "expect": expect}], config=cfg(p), jobs=[j])
        vec("finalize", f"{p}-finalize-unknown-id-uncapped", "5.1", [
            {"finalize": w["kill"], "args": json.dumps({w["id"]: "bash-9"}), "blocks": [{"text": long}],
             "expect": [{"text": long}]}], config=cfg(p), jobs=[j])
    j = job("bash-1", "running", cap=64)
    vec("finalize", "c-finalize-unchanged", "README: C bounds only job results", [
        {"finalize": "job_status", "args": '{"id":"bash-1"}', "blocks": [{"text": "p" * 1000}],
         "expect": [{"text": "p" * 1000}]}], config=cfg("c"), jobs=[j])


def profile_c():
    now = T0 + 61_400
    durations = [0, 980, 1000, 4210, 61_400, 120_000, 3_600_000, 3_723_005]
    for d in durations:
        j = job("query-1", "completed", kind="query", label="select", started=T0, finished=T0 + d,
                output="42 rows")
        vec("c", f"c-status-duration-{d}", "4.5: Go durations", [
            invoke("job_status", {"id": "query-1"}, c_text(c_status(j, now, 24576))),
        ], config=cfg("c"), jobs=[j], now=now)
    rows = [job("bash-1", "running", label="npm run dev", started=T0),
            job("query-1", "completed", kind="query", label="select", started=T0 + 1000, finished=T0 + 5210,
                output="x"),
            job("bash-2", "killed", label="sleep 9", started=T0 + 2000, finished=T0 + 3000,
                detail="signal: SIGTERM"),
            job("bash-3", "stopping", label="make", started=T0 + 3000),
            job("bash-4", "failed", label="other", owner="other")]
    visible = [r for r in rows if r["owner"] != "other"]
    text = "\n".join(
        f"{r['id']}\t{C_STATE[r['status']]}\t{r['kind']}\t{go_duration((r['finished_at'] or now) - r['started_at'])}\t{shown_label(r['label'])}"
        for r in reversed(visible))
    vec("c", "c-list-newest-first", "4.5 job_list", [invoke("job_list", {}, c_text(text))], config=cfg("c"),
        jobs=rows, now=now)
    vec("c", "c-list-empty", "4.5 job_list empty", [invoke("job_list", {}, c_text("No background jobs."))],
        config=cfg("c"))
    states = [
        ("running", job("q-1", "running", kind="q", started=T0)),
        ("stopping", job("q-1", "stopping", kind="q", started=T0)),
        ("succeeded", job("q-1", "completed", kind="q", output="42 rows")),
        ("succeeded-empty", job("q-1", "completed", kind="q", output="")),
        ("succeeded-detail", job("q-1", "completed", kind="q", output="built\n", detail="exit code: 3")),
        ("succeeded-detail-only", job("q-1", "completed", kind="q", output="", detail="exit code: 0")),
        ("failed", job("q-1", "failed", kind="q", detail="query exploded")),
        ("cancelled", job("q-1", "killed", kind="q", detail="context canceled")),
        ("cancelled-no-detail", job("q-1", "killed", kind="q")),
    ]
    for name, j in states:
        vec("c", f"c-status-{name}", "4.5 job_status", [
            invoke("job_status", {"id": "q-1"}, c_text(c_status(j, now, 24576)))], config=cfg("c"), jobs=[j],
            now=now)
    texts = [("ascii", "x" * 50_000 + "y" * 50_000, 200), ("han-100", "\u754c" * 1000, 100),
             ("han-202", "\u754c" * 1000, 202), ("han-201", "\u754c" * 1000, 201),
             ("e-acute", "\u00e9" * 1000, 201), ("budget-1", "hello, world", 65),
             ("max-1", "hello, world", 1), ("max-5", "hello, world", 5), ("max-40", "y" * 100, 40),
             ("exact", "z" * 300, 300), ("one-over", "z" * 301, 300), ("budget-2", "w" * 100, 66),
             ("emoji", "\U0001F600" * 200, 150)]
    for name, out, max_bytes in texts:
        j = job("export-1", "completed", kind="export", output=out)
        vec("c", f"c-truncate-{name}", "4.5 result truncation", [
            invoke("job_status", {"id": "export-1"}, c_text(c_status(j, now, max_bytes)))],
            config=cfg("c", maxResultBytes=max_bytes), jobs=[j], now=now)
    # Every regime of Go's two truncations, around each edge, in one, two,
    # three and four-byte characters.
    for name, out in [("y", "y" * 300), ("han", "\u754c" * 100), ("mixed", "a\U0001F600" * 60)]:
        for max_bytes in [1, 2, 3, 14, 15, 16, 17, 18, 20, 30, 40, 63, 64, 65, 66, 67, 68, 100, 130, 199, 200]:
            j = job("export-1", "completed", kind="export", output=out)
            vec("c", f"c-truncate-go-{name}-{max_bytes}", "README: C truncation follows Go's truncateMiddle and truncateBytes", [
                invoke("job_status", {"id": "export-1"}, c_text(c_status(j, now, max_bytes)))],
                config=cfg("c", maxResultBytes=max_bytes), jobs=[j], now=now)
    j = job("q-1", "failed", kind="q", detail="e" * 500)
    vec("c", "c-truncate-error", "README: C bounds failure texts too", [
        invoke("job_status", {"id": "q-1"}, c_text(c_status(j, now, 100)))],
        config=cfg("c", maxResultBytes=100), jobs=[j], now=now)
    # Waits: seconds, clamped to maxWaitSeconds; 0 or negative means the maximum.
    r = job("q-1", "running", kind="q", started=T0)
    for name, args, config, seconds in [
        ("default", {"id": "q-1"}, cfg("c"), 120), ("asked", {"id": "q-1", "timeout_seconds": 1}, cfg("c"), 1),
        ("clamped", {"id": "q-1", "timeout_seconds": 600}, cfg("c", maxWaitSeconds=5), 5),
        ("zero", {"id": "q-1", "timeout_seconds": 0}, cfg("c", maxWaitSeconds=7), 7),
        ("negative", {"id": "q-1", "timeout_seconds": -3}, cfg("c"), 120),
        ("hour", {"id": "q-1", "timeout_seconds": 3600}, cfg("c", maxWaitSeconds=3600), 3600),
    ]:
        still = f"Job q-1 is still running after {go_duration(seconds * 1000)}. It was not cancelled {EM} continue with other work and check job_status later."
        vec("c", f"c-wait-timeout-{name}", "4.5, 7.4", [
            invoke("job_wait", args, c_text(still),
                   waits=[{"expect": {"job_id": "q-1", "timeout_ms": seconds * 1000}, "then": {"stay": True}}]),
            {"state": {"q-1": {"status": "running"}}},
        ], config=config, jobs=[r], now=now)
    fin = settled(r, status="completed", finished_at=T0 + 4210, output="42 rows")
    vec("c", "c-wait-finishes", "4.5 finished job_wait", [
        invoke("job_wait", {"id": "q-1"}, c_text(c_status(fin, now, 24576)),
               waits=[{"expect": {"job_id": "q-1", "timeout_ms": 120000},
                       "then": {"settle": {"status": "completed", "finished_at": T0 + 4210, "output": "42 rows"}}}]),
    ], config=cfg("c"), jobs=[r], now=now)
    vec("c", "c-wait-aborted", "README: a wait cut short reads context canceled", [
        invoke("job_wait", {"id": "q-1"}, c_err("context canceled"),
               waits=[{"expect": {"job_id": "q-1", "timeout_ms": 120000}, "then": {"error": {"wait-aborted": None}}}]),
    ], config=cfg("c"), jobs=[r], now=now)
    other = job("q-2", "running", kind="q", owner="other")
    for tool in ("job_status", "job_wait", "job_cancel"):
        for name, args, expect in [
            ("unknown", {"id": "nope-1"}, c_err("agentcore: job not found")),
            ("foreign", {"id": "q-2"}, c_err("agentcore: job not found")),
            ("missing", {}, c_err("id is required")),
            ("empty", {"id": ""}, c_err("id is required")),
            ("blank", {"id": "   "}, c_err("id is required")),
            ("null", {"id": None}, c_err("id is required")),
        ]:
            vec("c", f"c-{tool}-{name}", "4.5 errors; 9.6 owner fence; Go trims ids", [
                invoke(tool, args, expect)], config=cfg("c"), jobs=[r, other], now=now)
    vec("c", "c-status-trimmed-id", "Go trims ids", [
        invoke("job_status", {"id": " q-1 "}, c_text(c_status(r, now, 24576)))], config=cfg("c"), jobs=[r], now=now)
    # Go's job_wait trims only to test for an empty id, then waits on the id as
    # given; job_cancel trims like job_status.
    vec("c", "c-wait-untrimmed-id", "Go's job_wait waits on the id as given", [
        invoke("job_wait", {"id": " q-1 "}, c_err("agentcore: job not found"))], config=cfg("c"), jobs=[r], now=now)
    vec("c", "c-cancel-trimmed-id", "Go trims ids", [
        invoke("job_cancel", {"id": " q-1 "}, c_text("Cancellation requested for q-1."))],
        config=cfg("c"), jobs=[r], now=now)
    vec("c", "c-cancel-live", "4.5 job_cancel", [
        invoke("job_cancel", {"id": "q-1"}, c_text("Cancellation requested for q-1.")),
        {"state": {"q-1": {"status": "stopping"}}},
    ], config=cfg("c"), jobs=[r], now=now)
    vec("c", "c-cancel-finished", "4.5 job_cancel no-op", [
        invoke("job_cancel", {"id": "q-1"}, c_text("Cancellation requested for q-1.")),
        invoke("job_cancel", {"id": "q-1"}, c_text("Cancellation requested for q-1.")),
    ], config=cfg("c"), jobs=[fin], now=now)
    vec("c", "c-wait-seconds-not-integer", "7.4: a non-integer timeout_seconds fails decoding", [
        invoke("job_wait", {"id": "q-1", "timeout_seconds": 1.5},
               {"text_prefix": "error: invalid arguments: ", "is_error": True, "value": None}),
    ], config=cfg("c"), jobs=[r], now=now)
    vec("c", "c-unknown-tool", "host convention", [
        invoke("job_frobnicate", {}, c_err('unknown tool "job_frobnicate"'))], config=cfg("c"))
    # Batched notices.
    small = job("q-1", "completed", kind="q", started=T0, finished=T0 + 980, output="42 rows")
    big = job("q-2", "completed", kind="q", started=T0, finished=T0 + 4210, output="r" * 5000)
    bad = job("q-3", "failed", kind="q", started=T0, finished=T0 + 61_400, detail="query exploded")
    gone = job("q-4", "killed", kind="q", started=T0, finished=T0 + 1000, detail="context canceled")
    edge = job("q-5", "completed", kind="q", started=T0, finished=T0 + 1000, output="e" * 2048)
    over = job("q-6", "completed", kind="q", started=T0, finished=T0 + 1000, output="e" * 2049)
    for name, js in [("small", [small]), ("big", [big]), ("failed", [bad]), ("cancelled", [gone]),
                     ("mixed", [small, big, bad, gone]), ("inline-limit", [edge]), ("over-limit", [over])]:
        text = "Background job update:\n" + "".join(c_line(x, 24576) for x in js).rstrip("\n")
        vec("c", f"c-batch-{name}", "4.5 completion notice; 6.7", [
            {"batch_notice": [x["id"] for x in js],
             "expect": {"text": text, "summary": None, "plugin": "jobs", "form": None}}],
            config=cfg("c"), jobs=js, now=now)
    vec("c", "c-batch-suppressed", "6.7 SuppressCompletionNotice", [
        {"batch_notice": ["q-1"], "expect": None}], config=cfg("c", suppressCompletionNotice=True), jobs=[small],
        now=now)
    vec("c", "c-batch-empty", "9.6: no jobs, no notice", [{"batch_notice": [], "expect": None}], config=cfg("c"))
    for x in (small, bad, gone):
        text = "Background job update:\n" + c_line(x, 24576, with_result=False).rstrip("\n")
        vec("c", f"c-completion-notice-{x['id']}", "README: completion-notice gives the line without the result", [
            {"completion_notice": x["id"], "expect": {"text": text, "summary": None, "plugin": "jobs", "form": None}}],
            config=cfg("c"), jobs=[x], now=now)
    cards = [("job_list", {}, {"title": "List background jobs", "kind": "read", "raw_input": None}),
             ("job_status", {"id": "q-1"}, {"title": "Check background job q-1", "kind": "read", "raw_input": "q-1"}),
             ("job_wait", {"id": "q-1"}, {"title": "Wait for background job q-1", "kind": "read", "raw_input": "q-1"}),
             ("job_cancel", {"id": "q-1"}, {"title": "Cancel background job q-1", "kind": "execute", "raw_input": "q-1"}),
             ("job_output", {}, None)]
    for tool, args, card in cards:
        vec("c", f"c-card-{tool}", "UI cards", [{"describe_call": tool, "args": json.dumps(args), "expect": card}],
            config=cfg("c"))


# ---------------------------------------------------------------------------
# The opt-in extensions (README "Extensions"): their texts, written here from
# the README's rules.


def line(stream, number, text):
    return {"stream": stream, "number": number, "text": text}


def grep_row(ln, hit, both):
    mark = ":" if hit else "-"
    prefix = f"{ln['stream']}{mark}" if both else ""
    return f"{prefix}{ln['number']}{mark}{ln['text']}"


def matched_lines(m):
    rows = [f"{b['number']}-{b['text']}" for b in m["before"]]
    return "\n".join(rows + [f"{m['line']['number']}:{m['line']['text']}"])


def extent_note(e):
    if e.get("dropped_bytes", 0) > 0:
        return f"{e['stream']} before line {e['first_line']} ({e['dropped_bytes']} bytes) is no longer kept"
    return None


def page_text(page, stream):
    ext = next((e for e in page["extents"] if e["stream"] == stream), None)
    last = ext["last_line"] if ext else 0
    lines = page["lines"]
    if lines:
        out = f"[{stream} lines {lines[0]['number']}-{lines[-1]['number']} of {last}"
    elif last == 0:
        out = f"[{stream} is empty"
    else:
        out = f"[no {stream} lines there; it has lines up to {last}"
    note = extent_note(ext) if ext else None
    if note:
        out += "; " + note
    out += "]"
    for ln in lines:
        out += f"\n{ln['number']}:{ln['text']}"
    return out


def search_text(page, pattern, both):
    streams = " and ".join(e["stream"] for e in page["extents"])
    total = page["total_matches"]
    out = f"[search /{pattern}/ in {streams}: {total} match{'' if total == 1 else 'es'}"
    if len(page["hits"]) < total:
        out += f", first {len(page['hits'])} shown"
    notes = [n for n in (extent_note(e) for e in page["extents"]) if n]
    if notes:
        out += "; " + "; ".join(notes)
    if page.get("stopped"):
        s = page["stopped"]
        out += (f"; stopped early at {s['stream']} line {s['line']}: the search ran out of time, "
                "so later lines were not searched")
    out += "]"
    prev = None
    for i, ln in enumerate(page["lines"]):
        if prev and (prev["stream"] != ln["stream"] or prev["number"] + 1 != ln["number"]):
            out += "\n--"
        out += "\n" + grep_row(ln, i in page["hits"], both)
        prev = ln
    return out


def listening(ports):
    shown = [f"[{p['address']}]:{p['port']}" if ":" in p["address"] else f"{p['address']}:{p['port']}"
             for p in ports]
    return "listening on " + ", ".join(shown)


def extensions():
    ready = ["ready"]
    for p in "ab":
        w = WORDS[p]
        noun = w["noun"]
        j = job("bash-1", pending="booting\nready on 8000\n")
        m = {"line": line("stdout", 2, "ready on 8000"), "before": [line("stdout", 1, "booting")]}
        until = {"pattern": "ready", "quiet_ms": None, "prompt_quiet_ms": None}
        expect = ok_read("booting\nready on 8000\n", j, p=p)
        expect["text"] = "[wait ended: stdout line 2 matched]\n" + matched_lines(m) + "\n" + expect["text"]
        vec("extensions", f"{p}-ready-matched", "README Extensions: ready", [
            invoke(w["output"], {w["id"]: "bash-1", "until": "ready"}, expect,
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 30000, "until": until},
                           "then": {"stay": True, "end": "matched", "matched": m}}]),
        ], config=cfg(p, extensions=ready), jobs=[j])
        quiet = job("bash-1", pending="")
        expect = ok_read("", quiet, p=p)
        expect["text"] = "[wait ended: no output for 251 ms]\n" + expect["text"]
        vec("extensions", f"{p}-ready-quiet", "README Extensions: ready (quiet_ms rounds up)", [
            invoke(w["output"], {w["id"]: "bash-1", "quiet_ms": 250.5, "timeout_ms": 5000}, expect,
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 5000,
                                      "until": {"pattern": None, "quiet_ms": 251, "prompt_quiet_ms": None}},
                           "then": {"stay": True, "end": "quiet"}}]),
        ], config=cfg(p, extensions=ready), jobs=[quiet])
        expect = ok_read("", quiet, p=p)
        expect["text"] = "[wait ended: timed out after 5000 ms]\n" + expect["text"]
        vec("extensions", f"{p}-ready-timed-out", "README Extensions: ready", [
            invoke(w["output"], {w["id"]: "bash-1", "until": "x", "timeout_ms": 5000}, expect,
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 5000,
                                      "until": {"pattern": "x", "quiet_ms": None, "prompt_quiet_ms": None}},
                           "then": {"stay": True}}]),
        ], config=cfg(p, extensions=ready), jobs=[quiet])
        done = settled(quiet, status="completed", detail="exit code: 0", finished_at=T0 + 3000)
        expect = ok_read("built\n", done, p=p)
        expect["text"] = f"[wait ended: the {noun} finished]\n" + expect["text"]
        vec("extensions", f"{p}-ready-settled", "README Extensions: ready", [
            invoke(w["output"], {w["id"]: "bash-1", "until": "x"}, expect,
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 30000,
                                      "until": {"pattern": "x", "quiet_ms": None, "prompt_quiet_ms": None}},
                           "then": {"settle": {"status": "completed", "detail": "exit code: 0",
                                               "finished_at": T0 + 3000, "pending": "built\n"}}}]),
        ], config=cfg(p, extensions=ready), jobs=[quiet])
        vec("extensions", f"{p}-ready-invalid-pattern", "README Extensions: ready; WIT invalid-pattern", [
            invoke(w["output"], {w["id"]: "bash-1", "until": "("}, err("invalid pattern: unclosed group"),
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 30000,
                                      "until": {"pattern": "(", "quiet_ms": None, "prompt_quiet_ms": None}},
                           "then": {"error": {"invalid-pattern": "unclosed group"}}}]),
        ], config=cfg(p, extensions=ready), jobs=[quiet])
        vec("extensions", f"{p}-ready-off", "README Extensions: a mount without them", [
            invoke(w["output"], {w["id"]: "bash-1", "until": "x"}, ok_read("", quiet, p=p)),
            invoke(f"{noun}_input", {w["id"]: "bash-1", "text": "x"},
                   err(f"unknown tool \"{noun}_input\"")),
        ], config=cfg(p), jobs=[quiet])

        # Input and signals.
        open_ = dict(job("bash-1"), input="open")
        closed = dict(job("bash-2"), input="closed")
        plain = job("bash-3")
        fin = job("bash-4", "completed", detail="exit code: 0")
        vec("extensions", f"{p}-input", "README Extensions: input", [
            invoke(f"{noun}_input", {w["id"]: "bash-1", "text": "y"},
                   {"text": f"wrote 2 bytes to {noun} bash-1\n[status: running]", "is_error": False, "value": None}),
            invoke(f"{noun}_input", {w["id"]: "bash-1", "text": "界", "newline": False, "close": True},
                   {"text": f"wrote 3 bytes to {noun} bash-1 and closed its input\n[status: running]",
                    "is_error": False, "value": None}),
            {"state": {"bash-1": {"written": "y\n界", "input": "closed"}}},
            invoke(f"{noun}_input", {w["id"]: "bash-1", "close": True},
                   err(f"the input of {noun} bash-1 is closed")),
            invoke(f"{noun}_input", {w["id"]: "bash-2", "text": "z"}, err(f"the input of {noun} bash-2 is closed")),
            invoke(f"{noun}_input", {w["id"]: "bash-3", "text": "z"},
                   err(f"{noun} bash-3 was started without open input (start it with \"stdin\": true)")),
            invoke(f"{noun}_input", {w["id"]: "bash-4", "text": "z"}, err(f"the input of {noun} bash-4 is closed")),
            invoke(f"{noun}_input", {w["id"]: "bash-3"},
                   err("invalid arguments: give \"text\", \"close\": true, or both")),
            invoke(f"{noun}_input", {w["id"]: "bash-9", "text": "z"}, err(f"unknown {noun} bash-9")),
        ], config=cfg(p, extensions=["input"]), jobs=[open_, closed, plain, fin])
        vec("extensions", f"{p}-signal", "README Extensions: input (signals)", [
            invoke(f"{noun}_signal", {w["id"]: "bash-3", "signal": "sigterm"},
                   {"text": f"sent SIGTERM to {noun} bash-3\n[status: running]", "is_error": False, "value": None}),
            {"state": {"bash-3": {"signals": ["TERM"]}}},
            invoke(f"{noun}_signal", {w["id"]: "bash-4", "signal": "INT"},
                   err(f"{noun} bash-4 has already finished [status: completed, exit code: 0]")),
            invoke(f"{noun}_signal", {w["id"]: "bash-3", "signal": "USR1"},
                   err("invalid signal: expected one of INT, TERM, HUP, KILL, STOP, CONT, got \"USR1\"")),
        ], config=cfg(p, extensions=["input"]), jobs=[open_, closed, plain, fin])

        # Pages and searches.
        page = {"lines": [line("stdout", 10, "10"), line("stdout", 11, "11")], "hits": [], "total_matches": 0,
                "extents": [{"stream": "stdout", "total_bytes": 3893, "dropped_bytes": 0,
                             "first_line": 1, "last_line": 1000}]}
        search = {"lines": [line("stdout", 4, "a"), line("stdout", 5, "err x"), line("stdout", 6, "b"),
                            line("stderr", 1, "err y")], "hits": [1, 3], "total_matches": 3,
                  "extents": [{"stream": "stdout", "total_bytes": 500, "dropped_bytes": 100,
                               "first_line": 3, "last_line": 9},
                              {"stream": "stderr", "total_bytes": 6, "dropped_bytes": 0,
                               "first_line": 1, "last_line": 1}]}
        paged = dict(job("bash-1"), lines=page)
        searched = dict(job("bash-2"), lines=search)
        bad = dict(job("bash-3"), lines={"invalid_pattern": "unclosed group"})
        vec("extensions", f"{p}-log", "README Extensions: log", [
            invoke(f"{noun}_log", {w["id"]: "bash-1", "start_line": 10, "lines": 2},
                   {"text": page_text(page, "stdout") + "\n[status: running]", "is_error": False, "value": None}),
            {"state": {"bash-1": {"last_query": {"range": {"stream": "stdout", "start": 10, "count": 2}}}}},
            invoke(f"{noun}_log", {w["id"]: "bash-2", "search": "err", "context": 1, "max_matches": 2},
                   {"text": search_text(search, "err", True) + "\n[status: running]", "is_error": False,
                    "value": None}),
            {"state": {"bash-2": {"last_query": {"search": {"stream": None, "pattern": "err", "context": 1,
                                                            "max_matches": 2}}}}},
            invoke(f"{noun}_log", {w["id"]: "bash-3", "search": "("}, err("invalid pattern: unclosed group")),
            invoke(f"{noun}_log", {w["id"]: "bash-1", "lines": 501},
                   err("invalid lines: expected a whole number from 1 to 500, got 501")),
        ], config=cfg(p, extensions=["log"]), jobs=[paged, searched, bad])
        # README: a search the host stopped (its time for one call ran out) says where.
        stopped = dict(search, stopped={"stream": "stdout", "line": 7},
                       extents=search["extents"][:1], lines=search["lines"][:3], hits=[1], total_matches=1)
        vec("extensions", f"{p}-log-search-stopped", "README Extensions: log (search budget)", [
            invoke(f"{noun}_log", {w["id"]: "bash-2", "search": "err", "stream": "stdout", "context": 1},
                   {"text": search_text(stopped, "err", False) + "\n[status: running]", "is_error": False,
                    "value": None}),
        ], config=cfg(p, extensions=["log"]), jobs=[dict(job("bash-2"), lines=stopped)])
        # README: patterns are bounded before anything is compiled.
        vec("extensions", f"{p}-pattern-too-long", "README Extensions: pattern bound", [
            invoke(f"{noun}_log", {w["id"]: "bash-2", "search": "a" * 4097},
                   err("invalid search: the pattern is 4097 bytes, more than the limit of 4096")),
            invoke(w["output"], {w["id"]: "bash-2", "until": "\\w" * 2049},
                   err("invalid until: the pattern is 4098 bytes, more than the limit of 4096")),
        ], config=cfg(p, extensions=["log", "ready"]), jobs=[dict(job("bash-2"), lines=stopped)])

        # Ports.
        ports = [{"address": "127.0.0.1", "port": 8000}, {"address": "::", "port": 8000}]
        served = dict(job("bash-1", pending="hi\n"), ports=ports)
        shown = dict(served, detail=listening(ports))
        expect = ok_read("hi\n", served, p=p)
        expect["text"] = read_text("hi\n", shown, None)
        vec("extensions", f"{p}-ports", "README Extensions: ports", [
            invoke(w["output"], {w["id"]: "bash-1"}, expect),
            invoke(w["list"], {}, {"text": f"bash-1 [bash] running \u2014 make test ({listening(ports)})",
                                   "is_error": False, "value": [public(served)]}),
        ], config=cfg(p, extensions=["ports"]), jobs=[served])

    # Profile C.
    j = job("bash-1", pending="")
    m = {"line": line("stdout", 3, "ok"), "before": [line("stdout", 2, "x")]}
    vec("extensions", "c-ready-matched", "README Extensions: ready (profile c)", [
        invoke("job_wait", {"id": "bash-1", "until": "^ok"},
               c_text("Job bash-1 is ready after 5s: stdout line 3 matched.\n" + matched_lines(m)
                      + "\nIt keeps running \u2014 check job_status, or job_cancel it when done."),
               waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 120000,
                                  "until": {"pattern": "^ok", "quiet_ms": None, "prompt_quiet_ms": PROMPT_QUIET_MS}},
                       "then": {"stay": True, "end": "matched", "matched": m}}]),
        invoke("job_wait", {"id": "bash-1", "quiet_seconds": 2},
               c_text("Job bash-1 has written nothing for 2s (running for 5s). It keeps running "
                      "\u2014 check job_status later."),
               waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 120000,
                                  "until": {"pattern": None, "quiet_ms": 2000, "prompt_quiet_ms": PROMPT_QUIET_MS}},
                       "then": {"stay": True, "end": "quiet"}}]),
        invoke("job_wait", {"id": "bash-1", "quiet_seconds": 0},
               c_err("invalid quiet_seconds: expected a whole number from 1 to 2147483, got 0")),
    ], config=cfg("c", extensions=True), jobs=[j])
    # The terminal extension's waits: every wait also asks for the prompt
    # end; the answer names the prompt (README Extensions: terminal).
    term = ["terminal"]
    prompt_until = {"pattern": None, "quiet_ms": None, "prompt_quiet_ms": PROMPT_QUIET_MS}
    for p in "ab":
        w = WORDS[p]
        noun = w["noun"]
        asking = job("bash-1", pending="Continue? [Y/n] ")
        expect = ok_read("Continue? [Y/n] ", asking, p=p)
        expect["text"] = f"[wait ended: the {noun} is waiting for input: Continue? [Y/n]]\n" + expect["text"]
        vec("extensions", f"{p}-terminal-prompt", "README Extensions: terminal (a wait ends at a prompt)", [
            invoke(w["output"], {w["id"]: "bash-1", "wait": True, "timeout_ms": 60000}, expect,
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 60000, "until": prompt_until},
                           "then": {"stay": True, "end": "prompt", "prompt": "Continue? [Y/n]"}}]),
        ], config=cfg(p, extensions=term), jobs=[asking])
        quiet = job("bash-1", pending="")
        vec("extensions", f"{p}-terminal-prompt-off", "README Extensions: terminal (prompt: false)", [
            invoke(w["output"], {w["id"]: "bash-1", "wait": True, "timeout_ms": 5000, "prompt": False},
                   ok_read("", quiet, p=p),
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 5000},
                           "then": {"stay": True}}]),
        ], config=cfg(p, extensions=term), jobs=[quiet])
        vec("extensions", f"{p}-terminal-plain-wait-timed-out", "README Extensions: terminal (no note unless at a prompt)", [
            invoke(w["output"], {w["id"]: "bash-1", "wait": True, "timeout_ms": 5000},
                   ok_read("", quiet, p=p),
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 5000, "until": prompt_until},
                           "then": {"stay": True}}]),
        ], config=cfg(p, extensions=term), jobs=[quiet])
    j = job("bash-1", pending="")
    for name, ext, next_step in (
        ("c-terminal-prompt", term, f"It keeps running {EM} job_cancel it when done."),
        ("c-terminal-input-prompt", term + ["input"], "Answer it with job_input, or job_cancel it."),
    ):
        vec("extensions", name, "README Extensions: terminal (profile c)", [
            invoke("job_wait", {"id": "bash-1"},
                   c_text(f"Job bash-1 is waiting for input after 5s: >>>\n{next_step}"),
                   waits=[{"expect": {"job_id": "bash-1", "timeout_ms": 120000, "until": prompt_until},
                           "then": {"stay": True, "end": "prompt", "prompt": ">>>"}}]),
        ], config=cfg("c", extensions=ext), jobs=[j])
    ports = [{"address": "0.0.0.0", "port": 5173}]
    page = {"lines": [], "hits": [], "total_matches": 0,
            "extents": [{"stream": "stdout", "total_bytes": 0, "dropped_bytes": 0, "first_line": 1, "last_line": 0}]}
    served = dict(job("bash-1"), ports=ports, lines=page)
    vec("extensions", "c-ports-and-log", "README Extensions: ports, log (profile c)", [
        invoke("job_status", {"id": "bash-1"}, c_text(f"job bash-1 (bash) \u2014 running after 5s\n{listening(ports)}")),
        invoke("job_log", {"id": " bash-1 "}, c_text(page_text(page, "stdout"))),
        {"state": {"bash-1": {"last_query": {"last": {"stream": "stdout", "count": 50}}}}},
        invoke("job_log", {"id": "bash-9"}, c_err("agentcore: job not found")),
        invoke("job_input", {"id": "bash-1", "text": "x"},
               c_err("job bash-1 was started without open input (start it with \"stdin\": true)")),
    ], config=cfg("c", extensions=True), jobs=[served])

    # Configs.
    vec("extensions", "extension-configs", "README Extensions: config", [
        {"configure": json.dumps({"extensions": True}),
         "expect": {"ok": {"extensions": ["ready", "input", "log", "limits", "ports", "yield", "sandbox", "terminal",
                                          "runners"],
                           "limits": {"timeout_ms": None, "cpu_seconds": None, "memory_bytes": None,
                                      "output_bytes": None}}}},
        {"configure": json.dumps({"profile": "b", "extensions": ["limits", "ports"],
                                  "limits": {"timeoutMs": 60000, "outputBytes": 1000}}),
         "expect": {"ok": {"extensions": ["limits", "ports"],
                           "limits": {"timeout_ms": 60000, "cpu_seconds": None, "memory_bytes": None,
                                      "output_bytes": 1000}}}},
        {"configure": json.dumps({"extensions": ["ready", "teleport"]}),
         "expect": {"err": "tool-jobs: unknown extension \"teleport\" (known: ready, input, log, limits, ports, yield, sandbox, terminal, runners)"}},
        {"configure": json.dumps({"profile": "c", "limits": {"timeoutMs": 5}}),
         "expect": {"err": "jobs: limits needs the \"limits\" extension (\"extensions\": [\"limits\"])"}},
        {"configure": json.dumps({"profile": "b", "extensions": False, "bogus": 1}),
         "expect": {"err": "tool-tasks: unknown config key \"bogus\" (known: profile, waitTimeoutMs, maxWaitTimeoutMs)"}},
    ])


# ---------------------------------------------------------------------------
# The start tool (README: the start tool; WIT start-tool, check-start, started)

START_BASE = {
    "a": "Run a shell command in the background and return a job id immediately (collect with job_output, stop with job_kill). No timeout applies.",
    "b": "Run a shell command in the background and return a task id immediately (collect with task_output, stop with task_kill). No timeout applies.",
    "c": "Run a shell command in the background and return a job id immediately (check with job_status, block with job_wait, stop with job_cancel). No timeout applies.",
}
LIMITS_SENTENCE = "Optional limits (timeout_ms, cpu_seconds, memory_bytes, max_output_bytes) stop it when reached; the session's maxima apply to every job and cannot be raised."
LIMIT_KEYS = [("timeout_ms", "timeout_ms", "Kill the job after this many milliseconds."),
              ("cpu_seconds", "cpu_seconds", "CPU seconds each process of the job may use."),
              ("memory_bytes", "memory_bytes", "Address space each process of the job may use, in bytes."),
              ("max_output_bytes", "output_bytes", "Kill the job once it has written this many bytes of output.")]
MAX_SAFE = 2**53 - 1
# README: the yield extension.
YIELD_MIN, YIELD_MAX = 250, 30000
YIELD_SENTENCE = ("With yield_ms it first waits up to that long: a command that ends in time answers with its "
                  "output, read; one that does not answers with what it printed so far and runs on.")
BIDI = {0x061C, 0x200E, 0x200F, *range(0x202A, 0x202F), *range(0x2066, 0x206A)}


# README: the sandbox extension.
FILES_RANK = {"read-only": 0, "workspace-write": 1, "full": 2}
FULL_SANDBOX = {"files": "full", "network": "on"}


def sandbox_words(sb):
    net = sb["network"]
    if isinstance(net, list):
        net_words = "network ports " + ",".join(str(p) for p in net)
    else:
        net_words = f"network {net}"
    return f"{sb['files']}, {net_words}"


def network_within(a, b):
    if b == "on" or a == "off":
        return True
    if isinstance(a, list) and isinstance(b, list):
        return all(p in b for p in a)
    return False


def sandbox_network(v):
    if v in ("on", "off"):
        return v
    if isinstance(v, list) and all(isinstance(p, int) and not isinstance(p, bool) and 1 <= p <= 65535 for p in v):
        return sorted(set(v))
    return None


def sandbox_check(args, session):
    """The sandbox a start asks for (extension `sandbox`): the request's value or the error text."""
    session = session or FULL_SANDBOX
    asked = args.get("sandbox")
    if asked is None:
        sb = dict(session)
    elif isinstance(asked, dict):
        for key in asked:
            if key not in ("files", "network"):
                return False, f'invalid sandbox: unknown key "{key}" (known: files, network)'
        files = asked.get("files")
        if files is None:
            files = session["files"]
        elif files not in FILES_RANK:
            return False, f'invalid sandbox.files: expected "full", "workspace-write" or "read-only", got {json.dumps(files)}'
        net = asked.get("network")
        if net is None:
            net = session["network"]
        else:
            parsed = sandbox_network(net)
            if parsed is None:
                return False, f'invalid sandbox.network: expected "on", "off" or a list of ports from 1 to 65535, got {json.dumps(net, separators=(",", ":"))}'
            net = parsed
        sb = {"files": files, "network": net}
    else:
        return False, f"invalid sandbox: expected an object with files and network, got {json.dumps(asked, separators=(',', ':'))}"
    if not (FILES_RANK[sb["files"]] <= FILES_RANK[session["files"]] and network_within(sb["network"], session["network"])):
        return False, (f"invalid sandbox: {sandbox_words(sb)} is wider than this session's sandbox "
                       f"({sandbox_words(session)}); a start may only narrow it")
    return True, (None if sb == FULL_SANDBOX else sb)


def start_tool(p, ext, session=None):
    props = {"command": {"type": "string", "description": "The command to run with bash -c."},
             "workdir": {"type": "string", "description": "Working directory; relative paths resolve against the session's."},
             "description": {"type": "string", "description": "Short description of what the command does."}}
    if "input" in ext:
        props["stdin"] = {"type": "boolean", "description": "Keep stdin open so the job can be written to (default: stdin is /dev/null)."}
    if "ports" in ext:
        props["name"] = {"type": "string", "description": "A name for the job; starting a name whose job is still running returns that job instead of a second one."}
    if "limits" in ext:
        for key, _, what in LIMIT_KEYS:
            props[key] = {"type": "integer", "description": what}
    if "sandbox" in ext:
        props["sandbox"] = {
            "type": "object",
            "description": f"Run this job in a narrower sandbox than the session's ({sandbox_words(session or FULL_SANDBOX)}): files (full, workspace-write or read-only) and network (on, off, or a list of TCP ports); never a wider one.",
            "properties": {
                "files": {"type": "string", "enum": ["full", "workspace-write", "read-only"]},
                "network": {"oneOf": [{"type": "string", "enum": ["on", "off"]},
                                      {"type": "array", "items": {"type": "integer", "minimum": 1, "maximum": 65535}}]},
            },
            "additionalProperties": False,
        }
    if "terminal" in ext:
        props["tty"] = {"type": "boolean", "description": "Run the job on a terminal (for prompts, REPLs and programs that need one): what it draws is rendered to text, and its input is open."}
        for key, word in (("rows", "rows"), ("cols", "columns")):
            default = 30 if key == "rows" else 120
            props[key] = {"type": "integer", "minimum": 2, "maximum": 1000, "description": f"The terminal's {word} (default {default})."}
    if "yield" in ext:
        props["yield_ms"] = {"type": "integer", "description": f"Wait up to this many milliseconds ({YIELD_MIN} to {YIELD_MAX}) for the command to end before answering; it is never killed for it."}
    text = START_BASE[p]
    if "limits" in ext:
        text = text.replace("No timeout applies.", LIMITS_SENTENCE)
    if "yield" in ext:
        text += " " + YIELD_SENTENCE
    return {"name": "bash", "description": text,
            "input_schema": {"type": "object", "properties": props, "required": ["command"]},
            "output_schema": {"type": "object", "properties": {"kind": {"type": "string", "enum": ["background"]}, "jobId": {"type": "string"}},
                              "required": ["kind", "jobId"], "additionalProperties": False},
            "annotations": ann("Run a background shell command", False, True, False, True)}


def start_check(args, ext, maxima, max_command=65536, session=None, render_output=False):
    """The start tool's argument check, in its documented order: an ok request or the error text."""
    if not isinstance(args, dict):
        return "invalid arguments: expected an object"
    violations = [f'"{k}" must be a string' for k in ("command", "workdir", "description")
                  if k in args and not isinstance(args[k], str)]
    if "command" not in args:
        violations.append('missing required property "command"')
    if violations:
        return "invalid arguments: " + "; ".join(violations)
    if isinstance(args.get("description"), str) and not args["description"].strip():
        return "invalid description: expected a non-blank string"
    req = {"command": args["command"], "workdir": args.get("workdir"), "description": args.get("description"),
           "stdin": False, "name": None,
           "limits": {"timeout_ms": None, "cpu_seconds": None, "memory_bytes": None, "output_bytes": None},
           "yield_ms": None, "sandbox": None, "tty": None, "render": False}
    if "input" in ext and args.get("stdin") is not None:
        if not isinstance(args["stdin"], bool):
            return 'invalid arguments: "stdin" must be a boolean'
        req["stdin"] = args["stdin"]
    if "ports" in ext and args.get("name") is not None:
        if not isinstance(args["name"], str):
            return 'invalid arguments: "name" must be a string'
        req["name"] = args["name"]
    if "limits" in ext:
        for key, field, _ in LIMIT_KEYS:
            most = maxima.get(field)
            asked = args.get(key)
            if asked is None:
                req["limits"][field] = most
                continue
            if isinstance(asked, bool) or not isinstance(asked, int) or not 1 <= asked <= MAX_SAFE:
                return f"invalid {key}: expected a whole number of at least 1, got {json.dumps(asked)}"
            if key == "timeout_ms" and asked > MAX_TIMER:
                return f"invalid timeout_ms: expected at most {MAX_TIMER}, got {asked}"
            if most is not None and asked > most:
                return f"invalid {key}: {asked} is more than this session's limit of {most}"
            req["limits"][field] = asked
    if "yield" in ext and args.get("yield_ms") is not None:
        y = args["yield_ms"]
        if isinstance(y, bool) or not isinstance(y, int) or not YIELD_MIN <= y <= YIELD_MAX:
            return f"invalid yield_ms: expected a whole number of milliseconds from {YIELD_MIN} to {YIELD_MAX}, got {json.dumps(y)}"
        req["yield_ms"] = y
    if "sandbox" in ext:
        ok, got = sandbox_check(args, session)
        if not ok:
            return got
        req["sandbox"] = got
    if "terminal" in ext:
        tty = args.get("tty")
        if tty is not None and not isinstance(tty, bool):
            return 'invalid arguments: "tty" must be a boolean'
        if not tty:
            for key in ("rows", "cols"):
                if args.get(key) is not None:
                    return f'invalid {key}: only a job started with "tty": true has a terminal'
        else:
            if args.get("stdin") is False:
                return ('invalid arguments: a job on a terminal reads its input from it; '
                        'leave out "stdin" or set it to true')
            size = {}
            for key, default in (("rows", 30), ("cols", 120)):
                v = args.get(key)
                if v is None:
                    size[key] = default
                elif isinstance(v, bool) or not isinstance(v, int) or not 2 <= v <= 1000:
                    return f"invalid {key}: expected a whole number from 2 to 1000, got {json.dumps(v)}"
                else:
                    size[key] = v
            req["tty"] = size
            req["stdin"] = True
        req["render"] = render_output and req["tty"] is None
    name = req["name"]
    if name is not None:
        if not name.strip():
            return "invalid name: expected a non-blank string"
        bad = [c for c in name if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or ord(c) in BIDI]
        if bad:
            return f"invalid name: it contains the control character U+{ord(bad[0]):04X}"
        if nbytes(name) > 128:
            return f"invalid name: {nbytes(name)} bytes is more than the limit of 128 bytes"
    if not req["command"].strip():
        return "invalid command: expected a non-blank string"
    if nbytes(req["command"]) > max_command:
        return f"invalid command: {nbytes(req['command'])} bytes is more than the limit of {max_command} bytes"
    return req


def start_refusal(p, error):
    (case, payload), = error.items()
    noun, kill = {"a": ("job", "job_kill"), "b": ("task", "task_kill"), "c": ("job", "job_cancel")}[p]
    if case == "no-controller":
        if p == "b":
            return "background tasks unavailable: no control surface is attached (load @deepseek-ai/dsh-tool-tasks)"
        return "background jobs unavailable: no job controller serves this agent (load @buckeyestudio/toh-tool-jobs in its composition)"
    if case == "stale-owner":
        return f'agent "{payload}" is not the registered agent instance (background {noun} owner must be live)'
    if case == "limit-reached":
        return f"background {noun} limit reached for this owner (limit: {payload}); use {kill} to stop an unneeded {noun}, wait for it to finish, then retry"
    return payload


def starts():
    every = ["ready", "input", "log", "limits", "ports", "yield", "sandbox"]
    for p in "abc":
        for ext_name, ext in (("none", []), ("all", every), ("limits", ["limits"]), ("input-ports", ["input", "ports"])):
            extra = {} if not ext else {"extensions": ext}
            vec("starts", f"{p}-start-tool-{ext_name}", "3.1 start tool; WIT start-tool",
                [{"start_tool": {}, "expect": start_tool(p, ext)}], config=cfg(p, **extra))
    maxima = {"timeout_ms": 5000, "output_bytes": 1000000}
    cases = [
        ("missing", {}), ("command-number", {"command": 5}), ("three-wrong", {"command": 1, "workdir": 2, "description": 3}),
        ("array", [1]), ("string", "make"), ("blank-description", {"command": "make", "description": "  "}),
        ("blank-command", {"command": " \t"}), ("plain", {"command": "make test"}),
        ("workdir", {"command": "make", "workdir": "sub/dir", "description": "build"}),
        ("name", {"command": "npm run dev", "name": "web"}), ("blank-name", {"command": " ", "name": " "}),
        ("name-bidi", {"command": "x", "name": "a\u202eb"}), ("name-newline", {"command": "x", "name": "a\nb"}),
        ("name-long", {"command": "x", "name": "n" * 129}), ("name-long-utf8", {"command": "x", "name": "\u00e9" * 65}),
        ("name-128", {"command": "x", "name": "n" * 128}), ("name-number", {"command": "x", "name": 5}),
        ("stdin", {"command": "cat", "stdin": True}), ("stdin-string", {"command": "cat", "stdin": "yes"}),
        ("stdin-null", {"command": "cat", "stdin": None}),
        ("timeout-zero", {"command": "x", "timeout_ms": 0}), ("timeout-fraction", {"command": "x", "timeout_ms": 1.5}),
        ("timeout-over-timer", {"command": "x", "timeout_ms": 3000000000}),
        ("timeout-over-max", {"command": "x", "timeout_ms": 6000}), ("timeout-in-range", {"command": "x", "timeout_ms": 4000}),
        ("cpu-unsafe", {"command": "x", "cpu_seconds": 9007199254740992}), ("memory-string", {"command": "x", "memory_bytes": "1"}),
        ("memory-bool", {"command": "x", "memory_bytes": True}), ("output-over-max", {"command": "x", "max_output_bytes": 1000001}),
        ("limits-given", {"command": "x", "cpu_seconds": 3, "memory_bytes": 1 << 30}),
        ("yield", {"command": "make", "yield_ms": 2000}), ("yield-low", {"command": "make", "yield_ms": 100}),
        ("yield-high", {"command": "make", "yield_ms": 30001}), ("yield-fraction", {"command": "make", "yield_ms": 250.5}),
        ("yield-string", {"command": "make", "yield_ms": "1000"}), ("yield-bounds", {"command": "make", "yield_ms": 250}),
    ]
    for p in "abc":
        for ext_name, ext, lim in (("none", [], {}), ("all", every, maxima)):
            extra = {} if not ext else {"extensions": ext}
            if lim:
                extra["limits"] = {"timeoutMs": lim["timeout_ms"], "outputBytes": lim["output_bytes"]}
            for name, args in cases:
                got = start_check(args, ext, lim)
                expect = {"ok": got} if isinstance(got, dict) else {"err": {"text": "Error: " + got, "is_error": True, "value": None}}
                vec("starts", f"{p}-check-start-{ext_name}-{name}", "3.1 start tool arguments; WIT check-start",
                    [{"check_start": json.dumps(args, ensure_ascii=False), "max_command_bytes": 65536,
                      "expect": expect}], config=cfg(p, **extra))
        # The terminal extension's start arguments (README Extensions: terminal).
        vec("starts", f"{p}-start-tool-terminal", "README Extensions: terminal; WIT start-tool",
            [{"start_tool": {}, "expect": start_tool(p, ["terminal"])}], config=cfg(p, extensions=["terminal"]))
        for name, args in (
            ("tty", {"command": "python3", "tty": True}),
            ("tty-sized", {"command": "top", "tty": True, "rows": 2, "cols": 1000}),
            ("tty-false", {"command": "x", "tty": False}),
            ("tty-null-rows", {"command": "x", "tty": True, "rows": None}),
            ("tty-string", {"command": "x", "tty": "yes"}),
            ("tty-stdin-false", {"command": "x", "tty": True, "stdin": False}),
            ("tty-stdin-true", {"command": "x", "tty": True, "stdin": True}),
            ("tty-rows-low", {"command": "x", "tty": True, "rows": 1}),
            ("tty-cols-high", {"command": "x", "tty": True, "cols": 1001}),
            ("tty-rows-fraction", {"command": "x", "tty": True, "rows": 24.5}),
            ("tty-cols-string", {"command": "x", "tty": True, "cols": "80"}),
            ("tty-rows-bool", {"command": "x", "tty": True, "rows": True}),
            ("rows-without-tty", {"command": "x", "rows": 24}),
            ("cols-with-tty-false", {"command": "x", "tty": False, "cols": 80}),
        ):
            for ext_name, ext in (("terminal", ["terminal"]), ("terminal-input", ["terminal", "input"])):
                got = start_check(args, ext, {})
                expect = {"ok": got} if isinstance(got, dict) else {"err": {"text": "Error: " + got, "is_error": True, "value": None}}
                vec("starts", f"{p}-check-start-{ext_name}-{name}", "README Extensions: terminal; WIT check-start",
                    [{"check_start": json.dumps(args), "max_command_bytes": 65536, "expect": expect}],
                    config=cfg(p, extensions=ext))
        # The mount's renderOutput: every start without a terminal asks for
        # its output rendered.
        rendered = json.dumps({"profile": p, "extensions": ["terminal"], "renderOutput": True})
        for name, args in (("plain", {"command": "make"}), ("tty", {"command": "make", "tty": True})):
            got = start_check(args, ["terminal"], {}, render_output=True)
            vec("starts", f"{p}-check-start-render-output-{name}", "README Extensions: terminal (renderOutput); WIT check-start",
                [{"check_start": json.dumps(args), "max_command_bytes": 65536, "expect": {"ok": got}}],
                config=rendered)
        plugin_name = {"a": "tool-jobs", "b": "tool-tasks", "c": "jobs"}[p]
        vec("configs", f"{p}-config-render-output", "README Extensions: terminal (renderOutput)", [
            {"configure": rendered, "expect": {"ok": {"render_output": True}}},
            {"configure": json.dumps({"profile": p, "renderOutput": True}),
             "expect": {"err": f'{plugin_name}: renderOutput needs the "terminal" extension ("extensions": ["terminal"])'}},
            {"configure": json.dumps({"profile": p, "extensions": ["terminal"], "renderOutput": "yes"}),
             "expect": {"err": f'{plugin_name}: renderOutput must be true or false, got "yes"'}},
        ])
        # The host's bound on a command, in bytes as written (README: bounded input).
        for name, command, bound in (("at-bound", "x" * 16, 16), ("over-bound", "x" * 17, 16),
                                     ("over-bound-utf8", "\u00e9" * 9, 16), ("blank-over-bound", " " * 40, 16),
                                     ("escaped-over-bound", "\n" * 20, 16)):
            got = start_check({"command": command}, [], {}, bound)
            expect = {"ok": got} if isinstance(got, dict) else {"err": {"text": "Error: " + got, "is_error": True, "value": None}}
            vec("starts", f"{p}-check-start-command-{name}", "README: bounded input; WIT check-start",
                [{"check_start": json.dumps({"command": command}), "max_command_bytes": bound, "expect": expect}],
                config=cfg(p))
        vec("starts", f"{p}-check-start-not-json", "3.1 start tool arguments; WIT check-start",
            [{"check_start": "{\"command\": ", "max_command_bytes": 65536,
              "expect": {"err_prefix": "Error: invalid arguments: "}}], config=cfg(p))
        request = {"command": "npm run dev", "workdir": None, "description": None, "stdin": False, "name": "web",
                   "limits": {"timeout_ms": None, "cpu_seconds": None, "memory_bytes": None, "output_bytes": None},
                   "yield_ms": None, "sandbox": None, "tty": None, "render": False}
        answers = [
            ("new", {"new": "bash-1"}, {"text": "started background job bash-1", "is_error": False,
                                        "value": {"kind": "background", "jobId": "bash-1"}}),
            ("existing", {"existing": "bash-2"}, {"text": 'background job bash-2 named "web" is already running; not started again',
                                                  "is_error": False, "value": {"kind": "background", "jobId": "bash-2"}}),
        ]
        for case, payload in (("no-controller", None), ("stale-owner", "alice"), ("limit-reached", 10),
                              ("refused", "invalid workdir: /nope is not a directory")):
            answers.append((case, {"error": {case: payload}},
                            {"text": "Error: " + start_refusal(p, {case: payload}), "is_error": True, "value": None}))
        for name, made, expect in answers:
            vec("starts", f"{p}-started-{name}", "4.2 start errors, 4.3 acknowledgement; WIT started",
                [{"started": {"request": request, "made": made}, "expect": expect}], config=cfg(p, extensions=every))
        # A yielding start waits on its new job first; a named one that was running,
        # and a refused one, answer at once (README: the yield extension).
        yielding = dict(request, yield_ms=1500)
        for name, made, expect in [("yield-new", {"new": "bash-4"}, {"wait": {"job_id": "bash-4", "timeout_ms": 1500}}),
                                   ("yield-existing", answers[1][1], answers[1][2]),
                                   ("yield-refused", answers[-1][1], answers[-1][2])]:
            vec("starts", f"{p}-started-{name}", "README: the yield extension; WIT started",
                [{"started": {"request": yielding, "made": made}, "expect": expect}], config=cfg(p, extensions=every))
        # The answer once the yield's wait ends (README: the yield extension): a
        # command that ended answers with its read; one still running with the
        # start line and what it printed so far; a wait that failed with the
        # registry's error in the profile's words.
        running = job("bash-4", "running", label="npm run dev", pending="compiling\n")
        done = settled(running, status="completed", detail="exit code: 0", finished_at=T0 + 900,
                       pending="compiling\nbuilt\n", output="compiling\nbuilt\n")
        value = {"kind": "background", "jobId": "bash-4"}
        if p == "c":
            ended_text = c_status(done, T0 + 5000, 24576)
            running_text = "started background job bash-4"
            gone_text = "error: agentcore: job not found"
        else:
            ended_text = read_text("compiling\nbuilt\n", done, None)
            running_text = "started background job bash-4\n" + read_text("compiling\n", running, None)
            gone_text = f"Error: unknown {WORDS[p]['noun']} bash-4"
        settle = {"status": "completed", "detail": "exit code: 0", "finished_at": T0 + 900,
                  "pending": "compiling\nbuilt\n", "output": "compiling\nbuilt\n"}
        for name, then, expect, reported in [
            ("ended", {"settle": settle}, {"text": ended_text, "is_error": False, "value": value}, True),
            ("runs-on", {}, {"text": running_text, "is_error": False, "value": value}, False),
            ("gone", {"error": {"unknown-job": "bash-4"}}, {"text": gone_text, "is_error": True, "value": None}, False),
        ]:
            asked = {"job_id": "bash-4", "timeout_ms": 1500}
            expect = dict(expect, waits=[asked])
            args = json.dumps({"command": "npm run dev", "yield_ms": 1500})
            steps = [{"started": {"request": dict(yielding, name=None), "made": {"new": "bash-4"}, "args": args,
                                  "waits": [{"expect": asked, "then": then}]},
                      "expect": expect}]
            if name != "gone":
                steps.append({"state": {"bash-4": {"reported": reported}}})
            vec("starts", f"{p}-yield-resumed-{name}", "README: the yield extension; WIT started, resume",
                steps, config=cfg(p, extensions=every), jobs=[running])
    for p, transport, disposed in (("a", "push", "report"), ("b", "push", "ignore"), ("c", "pull", "report")):
        vec("configs", f"config-{p}-notice-transport", "6.6, 6.7; WIT config notice-transport, disposed-owner",
            [{"configure": cfg(p), "expect": {"ok": {"notice_transport": transport, "disposed_owner": disposed}}}])


def sandboxes():
    """README: the sandbox extension (WIT 0.7.0): the session's sandbox in the
    config, a narrower one on a start, and each job's in its status."""
    session = {"files": "workspace-write", "network": "off"}
    plugin = {"a": "tool-jobs", "b": "tool-tasks", "c": "jobs"}
    for p in "abc":
        with_session = cfg(p, extensions=["sandbox"], sandbox=session)
        vec("starts", f"{p}-sandbox-start-tool", "README: the sandbox extension; WIT start-tool",
            [{"start_tool": {}, "expect": start_tool(p, ["sandbox"], session)}], config=with_session)
        vec("starts", f"{p}-sandbox-start-tool-no-session", "README: the sandbox extension; WIT start-tool",
            [{"start_tool": {}, "expect": start_tool(p, ["sandbox"])}], config=cfg(p, extensions=["sandbox"]))
        cases = [
            ("none", {"command": "make"}),
            ("null", {"command": "make", "sandbox": None}),
            ("read-only", {"command": "make", "sandbox": {"files": "read-only"}}),
            ("same", {"command": "make", "sandbox": {"files": "workspace-write", "network": "off"}}),
            ("full", {"command": "make", "sandbox": {"files": "full"}}),
            ("network-on", {"command": "make", "sandbox": {"network": "on"}}),
            ("ports-from-off", {"command": "make", "sandbox": {"network": [443]}}),
            ("unknown-key", {"command": "make", "sandbox": {"fs": "read-only"}}),
            ("bad-files", {"command": "make", "sandbox": {"files": "none"}}),
            ("bad-port", {"command": "make", "sandbox": {"network": [0]}}),
            ("string", {"command": "make", "sandbox": "read-only"}),
        ]
        for name, args in cases:
            got = start_check(args, ["sandbox"], {}, session=session)
            expect = {"ok": got} if isinstance(got, dict) else {"err": {"text": "Error: " + got, "is_error": True, "value": None}}
            vec("starts", f"{p}-check-start-sandbox-{name}", "README: the sandbox extension; WIT check-start",
                [{"check_start": json.dumps(args), "max_command_bytes": 65536, "expect": expect}], config=with_session)
        # Without a session sandbox (full authority), any sandbox narrows it.
        open_cases = [
            ("ports", {"command": "make", "sandbox": {"network": [443, 80, 443]}}),
            ("full", {"command": "make", "sandbox": {"files": "full", "network": "on"}}),
        ]
        for name, args in open_cases:
            got = start_check(args, ["sandbox"], {})
            expect = {"ok": got} if isinstance(got, dict) else {"err": {"text": "Error: " + got, "is_error": True, "value": None}}
            vec("starts", f"{p}-check-start-sandbox-open-{name}", "README: the sandbox extension; WIT check-start",
                [{"check_start": json.dumps(args), "max_command_bytes": 65536, "expect": expect}],
                config=cfg(p, extensions=["sandbox"]))
        # The config's own sandbox.
        vec("configs", f"config-{p}-sandbox", "README: the sandbox extension; WIT config sandbox", [
            {"configure": cfg(p, extensions=["sandbox"], sandbox={"files": "read-only", "network": [443, 80]}),
             "expect": {"ok": {"sandbox": {"files": "read-only", "network": [80, 443]}}}},
            {"configure": cfg(p, extensions=["sandbox"], sandbox={"files": "full", "network": "on"}),
             "expect": {"ok": {"sandbox": None}}},
            {"configure": cfg(p, sandbox=session),
             "expect": {"err": f'{plugin[p]}: sandbox needs the "sandbox" extension ("extensions": ["sandbox"])'}},
            {"configure": cfg(p, extensions=["sandbox"], sandbox={"files": "none"}),
             "expect": {"err": f'{plugin[p]}: sandbox.files must be "full", "workspace-write" or "read-only", got "none"'}},
            {"configure": cfg(p, extensions=["sandbox"], sandbox={"files": "full", "net": "off"}),
             "expect": {"err": f'{plugin[p]}: unknown sandbox key "net" (known: files, network)'}},
        ])
    # Each job's sandbox in its status and list row.
    fenced = dict(job("bash-1", "running", pending="x\n"), sandbox={"files": "read-only", "network": "off"})
    plain = job("bash-2", "running")
    note = "[sandbox: read-only, network off]"
    for p in "ab":
        w = WORDS[p]
        for ext, shown in ((["sandbox"], True), ([], False)):
            rows = f"bash-1 [bash] running {EM} make test" + (f" {note}" if shown else "") + f"\nbash-2 [bash] running {EM} make test"
            read = "x\n" + (f"{note}\n" if shown else "") + "[status: running]"
            vec("extensions", f"{p}-sandbox-words-{'on' if shown else 'off'}", "README: the sandbox extension", [
                invoke(w["list"], {}, {"text": rows, "is_error": False, "value": [public(fenced), public(plain)]}),
                invoke(w["output"], {w["id"]: "bash-1"}, {"text": read, "is_error": False,
                                                        "value": {"text": "x\n", w["key"]: public(fenced)}}),
            ], config=cfg(p, extensions=ext), jobs=[fenced, plain])
    now = T0 + 5000
    status = c_status(fenced, now, 24576)
    first, _, rest = status.partition("\n")
    vec("extensions", "c-sandbox-words", "README: the sandbox extension", [
        invoke("job_status", {"id": "bash-1"}, c_text(first + f" {note}" + ("\n" + rest if rest else ""))),
    ], config=cfg("c", extensions=["sandbox"]), jobs=[fenced], now=now)


def main():
    for family in (reads, capped_reads, notices, delivery, errors, waits, lists_and_kills, definitions,
                   configs, finalizes, profile_c, extensions, starts, sandboxes):
        family()
    ids = [v["id"] for vs in ALL.values() for v in vs]
    dupes = {i for i in ids if ids.count(i) > 1}
    if dupes:
        sys.exit(f"duplicate vector ids: {sorted(dupes)}")
    check = "--check" in sys.argv
    stale = []
    os.makedirs(VECTORS, exist_ok=True)
    for family, vs in ALL.items():
        path = os.path.join(VECTORS, f"{family}.json")
        text = json.dumps(vs, indent=1, ensure_ascii=False) + "\n"
        if check:
            with open(path, encoding="utf-8") as f:
                if f.read() != text:
                    stale.append(path)
        else:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
    if stale:
        sys.exit("out of date (run conformance/generate.py): " + ", ".join(stale))
    print(f"{len(ids)} vectors in {len(ALL)} files")


if __name__ == "__main__":
    main()
