#!/usr/bin/env python3
"""Seeded fuzz test of `jobs-host mcp --extensions all` over stdio.

The real binary is driven by a pipe, as an MCP client would drive it, with a mix
of valid traffic and every kind of malformed input a client (or a broken proxy)
can produce. The run is split into sessions (one host process each) so that a
crash or a leak is attributed to the few hundred lines that caused it.

What is checked, per session:

- every request that is a single JSON object with "jsonrpc": "2.0", a string
  "method" and a string or 64-bit integer "id" gets exactly one answer carrying
  that id (reused ids count once per request: each must get its own answer);
- every line the host writes is valid JSON-RPC 2.0; a response always has an
  "id" member; errors with "id": null come only for lines that could not carry
  an id (not JSON, not an object, an id of the wrong type, ...);
- the session survives all of it: a final `job_list` still shows the sentinel
  job `bash-1`, the host exits with status 0 once stdin closes, the sentinel's
  process (and every other process of the session) is gone, and no spill
  directory is left in the session's TMPDIR.

Generation is deterministic for a given seed (random.Random, no dependence on
timing); only the temp paths in the sentinel's command differ between runs.

Failures are grouped by what the generator meant to test (the line's tag), and
one example of each is replayed on a fresh host to show its answer. A reused
id that lost an answer is traced by sending each candidate line alone to a
fresh host; so are responses without an id, one line of each kind.

Usage: python3 tests/fuzz/mcp_fuzz.py [--lines N] [--seed S] [--session-lines N]
                                      [--transcript DIR] [--keep-tmp]
The binary is $JOBS_HOST_BIN, by default target/debug/jobs-host in the repo.
CI runs tests/fuzz/run (10,000 lines, a fixed seed).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shlex
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PROTOCOL_VERSION = "2025-06-18"
SENTINEL_JOB = "bash-1"

# Each session may start at most this many real `bash` jobs (all `true` or
# `echo x`): the host admits 10 live jobs per owner, and these end at once.
BASH_START_CAP = 20
# Every wait this test asks for is at most this long, so a session's traffic
# is answered within a second or two of the last line.
MAX_WAIT_MS = 50
HUGE_STRING_CHARS = 1 << 20
DEEP_NESTING = 10_000

# Bounds on every wait (seconds). The handshake is generous: the first start
# compiles the component into the cache.
HANDSHAKE_TIMEOUT = 90.0
CALL_TIMEOUT = 15.0
SETTLE_TIMEOUT = 20.0
# Longer than the host's default kill grace (3 s): a job_kill of a stopped job
# is answered only once its SIGKILL has gone out.
SETTLE_QUIET = 4.0
EXIT_TIMEOUT = 30.0
GONE_TIMEOUT = 30.0
REPLAY_TIMEOUT = 5.0
WRITE_TIMEOUT = 30.0  # one line: a host that reads nothing for this long is stuck
ISOLATE_GRACE = 0.25
ISOLATE_BUDGET = 60.0  # seconds per fresh host used to attribute failures
MAX_ISOLATED = 400  # candidate lines per session asked about on a fresh host

# The tools and their argument types, as `jobs-host tools --extensions all`
# declares them (profile A with every extension).
TOOLS: dict[str, dict[str, str]] = {
    "bash": {
        "command": "string", "workdir": "string", "description": "string",
        "stdin": "boolean", "name": "string", "timeout_ms": "integer",
        "cpu_seconds": "integer", "memory_bytes": "integer", "max_output_bytes": "integer",
    },
    "job_output": {
        "job_id": "string", "wait": "boolean", "timeout_ms": "number",
        "until": "string", "quiet_ms": "number",
    },
    "job_list": {},
    "job_kill": {"job_id": "string", "reason": "string"},
    "job_input": {"job_id": "string", "text": "string", "newline": "boolean", "close": "boolean"},
    "job_signal": {"job_id": "string", "signal": "string"},
    "job_log": {
        "job_id": "string", "stream": "string", "start_line": "integer", "lines": "integer",
        "search": "string", "context": "integer", "max_matches": "integer",
    },
}
REQUIRED = {
    "bash": ["command"], "job_output": ["job_id"], "job_list": [], "job_kill": ["job_id"],
    "job_input": ["job_id"], "job_signal": ["job_id", "signal"], "job_log": ["job_id"],
}
ARG_SLOTS = [(tool, arg) for tool, args in TOOLS.items() for arg in args]

# Job ids for job_kill and job_signal: never the sentinel, and nothing a lenient
# parser could read as it ("1", "Bash-1", " bash-1").
OTHER_JOB_IDS = [f"bash-{n}" for n in range(2, 26)] + [
    "bash-0", "bash-99999", "job-3", "", "nope", "bash-", "bash-2x", "é✓",
]

# Values of the wrong JSON type for each declared type. None of them can be
# read as the sentinel's id, and a lenient reading of any number is small.
WRONG = {
    "string": [7, -3, 2.5, True, False, None, [], ["x"], {}, {"k": "v"}],
    "boolean": ["true", "false", "yes", 1, 0, None, [], {}],
    "integer": ["5", 2.5, True, None, [], {}, "abc", -0.5],
    "number": ["20", True, None, [], {}, "x"],
}

LOG_LEVELS = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"]
# Request ids at the edges of what an implementation may store: i64 and u64
# bounds (both are integers the framing layer accepts as ids), 2^53 + 1.
EDGE_INT_IDS = [0, -1, -987654321, 2**31, 2**53 + 1, 2**63 - 1, -(2**63), 2**63, 2**64 - 1]
STRING_IDS = ["", " ", "0", "-1", "1.5", "null", "é✓𝄞", '"quoted"\\', "line\nbreak", "a" * 300]

NOT_JSON = object()  # the shape of a line a conforming JSON parser rejects

# The whole run's bound (time.monotonic()), set by main(): sessions, and the
# fresh hosts that attribute failures, all stop at it.
run_deadline = float("inf")


class Raw:
    """JSON text spliced verbatim into a generated message, for what json.dumps
    cannot write (1e400, 10,000-deep nesting). `shape` is what a Python parser
    would read there; the ledger judges the line by it."""

    def __init__(self, text: str, shape: object):
        self.text, self.shape = text, shape


def encode(obj: object, ascii_only: bool = False) -> bytes:
    raws: list[str] = []

    def sub(v):
        if isinstance(v, Raw):
            raws.append(v.text)
            return f"\x00raw{len(raws) - 1}\x00"
        if isinstance(v, dict):
            return {k: sub(x) for k, x in v.items()}
        if isinstance(v, list):
            return [sub(x) for x in v]
        return v

    text = json.dumps(sub(obj), separators=(",", ":"), ensure_ascii=ascii_only)
    for i, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00raw{i}\x00"), raw, 1)
    return text.encode("utf-8")


def shape_of(obj: object) -> object:
    if isinstance(obj, Raw):
        return obj.shape
    if isinstance(obj, dict):
        return {k: shape_of(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [shape_of(v) for v in obj]
    return obj


def valid_id(v: object) -> bool:
    # `type(...) is int`: True and False are ints to isinstance, not to JSON.
    return type(v) is str or (type(v) is int and -(2**63) <= v < 2**64)


def id_key(v: object) -> tuple:
    if type(v) is str:
        return ("s", v)
    if type(v) is int:
        return ("i", v)
    return ("x", json.dumps(v))


def show_id(key: tuple) -> str:
    return json.dumps(key[1])[:60] if key[0] in ("s", "i") else key[1][:60]


def clip(data: bytes | str, limit: int = 300) -> str:
    text = data.decode("utf-8", "backslashreplace") if isinstance(data, bytes) else data
    return text if len(text) <= limit else text[:limit] + f"... ({len(text)} chars)"


@dataclass
class Line:
    raw: bytes
    tag: str  # the generator's name for what this line tests; failures are grouped by it
    shape: object = NOT_JSON
    extra_may: list = field(default_factory=list)  # further ids an answer may carry
    demote: bool = False  # an answer may come but is not owed (ambiguous lines)
    cancels: object = None  # the requestId of a notifications/cancelled


def expectation(line: Line) -> tuple[tuple | None, list[tuple], bool]:
    """What the host owes for one line: (the id key an answer is owed for, id keys
    an answer may carry, whether an error with id null may come for it)."""
    s = line.shape
    if s is NOT_JSON:
        return None, [id_key(v) for v in line.extra_may], True
    if isinstance(s, list):
        # A batch: MCP 2025-06-18 has none, so one error (id null) or one answer
        # per element are both acceptable.
        return None, [id_key(m["id"]) for m in s if isinstance(m, dict) and valid_id(m.get("id"))], True
    if not isinstance(s, dict):
        return None, [], True
    may = [id_key(v) for v in line.extra_may]
    has_id = "id" in s
    if has_id and not valid_id(s["id"]):
        if type(s["id"]) is int:
            may.append(id_key(s["id"]))  # beyond 64 bits, yet a host may echo it
        return None, may, True
    request_shape = s.get("jsonrpc") == "2.0" and type(s.get("method")) is str
    if has_id and request_shape and not line.demote:
        return id_key(s["id"]), may, False
    if has_id:
        may.append(id_key(s["id"]))
    # A well-formed notification or response must get no answer at all.
    notification = request_shape and not has_id and isinstance(s.get("params", {}), (dict, list))
    response = (s.get("jsonrpc") == "2.0" and "method" not in s and has_id
                and ("result" in s) != ("error" in s))
    return None, may, not (notification or response)


class Ledger:
    """Which answers the host owes for a session's lines, built before they are sent."""

    def __init__(self, lines: list[Line]):
        self.owed: dict[tuple, list[int]] = {}
        self.may: dict[tuple, list[int]] = {}
        self.may_null = 0
        self.relaxed = 0
        for i, line in enumerate(lines):
            owed, may, may_null = expectation(line)
            if owed is not None:
                self.owed.setdefault(owed, []).append(i)
            for key in may:
                self.may.setdefault(key, []).append(i)
            self.may_null += may_null
            if line.cancels is not None and valid_id(line.cancels):
                # MCP lets a receiver drop the answer to a cancelled request: the
                # earlier requests with this id are no longer owed, only allowed.
                key = id_key(line.cancels)
                earlier = [j for j in self.owed.get(key, []) if j < i]
                if earlier:
                    self.owed[key] = [j for j in self.owed[key] if j >= i]
                    self.may.setdefault(key, []).extend(earlier)
                    self.relaxed += len(earlier)

    def total_owed(self) -> int:
        return sum(len(v) for v in self.owed.values())


class Generator:
    """Every line of one session, from one seeded Random."""

    def __init__(self, rng: random.Random):
        self.rng = rng
        self.used_ids: list = []
        self.bash_starts = 0
        self.slot = rng.randrange(len(ARG_SLOTS))  # wrong-type arguments go round all slots
        self.responses = 0
        families = [
            (22, self.valid_request), (6, self.notification), (3, self.cancellation),
            (25, self.wrong_type), (2, self.missing_required), (1, self.extra_argument),
            (6, self.params_shape), (3, self.meta_shape), (3, self.name_shape),
            (2, self.arguments_shape), (3, self.unknown_method), (3, self.envelope),
            (4, self.bad_id), (1.5, self.deep_nesting), (1, self.huge_string),
            (2, self.huge_number), (2, self.invalid_utf8), (3, self.truncated),
            (2, self.batch), (3, self.response), (2, self.non_object),
            (1, self.lone_surrogate), (1, self.duplicate_keys), (1, self.crlf),
        ]
        self.weights = [w for w, _ in families]
        self.families = [f for _, f in families]

    # ---- ids -------------------------------------------------------------
    def request_id(self):
        r = self.rng.random()
        if self.used_ids and r < 0.15:
            v = self.rng.choice(self.used_ids)  # a duplicate, maybe of a request still in flight
        elif r < 0.55:
            v = self.rng.randrange(1_000_000)
        elif r < 0.62:
            v = self.rng.choice(EDGE_INT_IDS)
        elif r < 0.75:
            v = self.rng.choice(STRING_IDS)
        else:
            v = "".join(self.rng.choice("abcxyz0123-_") for _ in range(self.rng.randint(1, 12)))
        self.used_ids.append(v)
        return v

    # ---- building blocks ---------------------------------------------------
    def message(self, method, params=..., id=...) -> dict:
        msg = {"jsonrpc": "2.0"}
        if id is not ...:
            msg["id"] = id
        msg["method"] = method
        if params is not ...:
            msg["params"] = params
        if self.rng.random() < 0.1:
            # Member order must not matter (id after params, method first, ...).
            items = list(msg.items())
            self.rng.shuffle(items)
            msg = dict(items)
        return msg

    def request(self, method, params=...) -> dict:
        return self.message(method, params, id=self.request_id())

    def line(self, obj, tag, **kw) -> Line:
        return Line(encode(obj), tag, shape_of(obj), **kw)

    def valid_value(self, tool, arg):
        r = self.rng
        choices = {
            ("bash", "workdir"): [".", "/", "/tmp", "no/such/dir"],
            ("bash", "description"): ["d", "fuzz", "é✓"],
            ("bash", "name"): ["n0", "n1", "n2"],
            ("bash", "timeout_ms"): [1, 10, MAX_WAIT_MS],
            ("bash", "cpu_seconds"): [1, 10],
            ("bash", "memory_bytes"): [1 << 28, 1 << 30, 1 << 33],
            ("bash", "max_output_bytes"): [1, 100, 1 << 20],
            ("job_output", "timeout_ms"): [0, 1, 10, MAX_WAIT_MS, 2.5],
            ("job_output", "until"): ["x", "^never$", "(", "ready|done", ""],
            ("job_output", "quiet_ms"): [0, 1, 10, MAX_WAIT_MS, 2.5],
            ("job_kill", "reason"): ["r", "", "é"],
            ("job_input", "text"): ["hi", "", "é✓\n"],
            ("job_signal", "signal"): ["INT", "TERM", "HUP", "KILL", "STOP", "CONT", "term", "SIGTERM", "9", ""],
            ("job_log", "stream"): ["stdout", "stderr", "both", ""],
            ("job_log", "start_line"): [1, 2, 0, -1, 2**31],
            ("job_log", "lines"): [1, 50, 500, 0, 501],
            ("job_log", "search"): ["x", "(", ".*", "^$"],
            ("job_log", "context"): [0, 2, 10, 11, -1],
            ("job_log", "max_matches"): [1, 20, 200, 0, 201],
        }
        if arg == "job_id":
            # job_kill and job_signal never name the sentinel; the others may.
            if tool in ("job_kill", "job_signal") or r.random() < 0.3:
                return r.choice(OTHER_JOB_IDS)
            return SENTINEL_JOB
        if TOOLS[tool][arg] == "boolean":
            return r.random() < 0.5
        return r.choice(choices[(tool, arg)])

    def tool_args(self, tool, mutate=None, value=None, omit=()) -> dict:
        """Arguments for `tool`: valid ones, except `mutate` set to `value` and the
        names in `omit` left out; then made safe (short waits, capped starts)."""
        r = self.rng
        args = {}
        for arg in TOOLS[tool]:
            if arg == mutate:
                args[arg] = value
            elif arg in omit:
                continue
            elif arg == "command":
                if self.bash_starts < BASH_START_CAP:
                    args[arg] = r.choice(["true", "echo x"])
            elif arg in REQUIRED[tool] or r.random() < 0.3:
                args[arg] = self.valid_value(tool, arg)
        if tool == "bash" and "command" in args:
            # Counted even when another argument is wrong: a lenient host may start it.
            self.bash_starts += 1
        if tool == "job_output":
            waits = [a for a in ("wait", "until", "quiet_ms") if a in args]
            if mutate == "timeout_ms":
                # The host may not read this timeout (it would wait the default
                # 30 s): nothing in the call may ask for a wait.
                for a in waits:
                    del args[a]
            elif waits:
                # `until` and `quiet_ms` imply a wait, and a mangled `wait` may
                # still be read as true: each gets a short valid timeout.
                args["timeout_ms"] = r.choice([0, 1, 10, MAX_WAIT_MS])
        return args

    def tool_call_obj(self, tool=None, mutate=None, value=None, omit=()) -> dict:
        tool = tool or self.rng.choice(list(TOOLS))
        params = {"name": tool, "arguments": self.tool_args(tool, mutate, value, omit)}
        if self.rng.random() < 0.1:
            params["_meta"] = {"progressToken": self.rng.randrange(100)}
        return self.request("tools/call", params)

    def valid_request_obj(self) -> tuple[dict, str]:
        r = self.rng.random()
        if r < 0.6:
            obj = self.tool_call_obj()
            return obj, f"valid/tools/call/{obj['params']['name']}"
        if r < 0.75:
            return self.request("ping", self.rng.choice([..., {}, {"_meta": {}}])), "valid/ping"
        if r < 0.85:
            return self.request("tools/list", self.rng.choice([..., {}, {"cursor": "x"}])), "valid/tools/list"
        if r < 0.95:
            level = self.rng.choice(LOG_LEVELS + ["loud"])
            return self.request("logging/setLevel", {"level": level}), "valid/logging/setLevel"
        return self.request("initialize", init_params()), "valid/initialize-again"

    # ---- line families ----------------------------------------------------
    def next_line(self) -> Line:
        return self.rng.choices(self.families, self.weights)[0]()

    def valid_request(self) -> Line:
        obj, tag = self.valid_request_obj()
        return self.line(obj, tag)

    def notification(self) -> Line:
        r = self.rng
        method, params = r.choice([
            ("notifications/initialized", ...),
            ("notifications/progress", {"progressToken": r.randrange(100), "progress": 1}),
            ("notifications/roots/list_changed", {}),
            ("notifications/whatever", {"x": 1}),
            ("notifications/initialized", []),
            ("ping", ...),  # a request method sent as a notification: no answer
            ("tools/call", {"name": "job_list", "arguments": {}}),
        ])
        shape = "/params=array" if isinstance(params, list) else ""
        return self.line(self.message(method, params), f"notification/{method}{shape}")

    def cancellation(self) -> Line:
        r = self.rng
        if self.used_ids and r.random() < 0.5:
            target = r.choice(self.used_ids)  # maybe still in flight
        else:
            target = r.choice([r.randrange(10**7, 10**8), "never-sent", {}, None, 1.5])
        params = {"requestId": target, "reason": "fuzz"}
        return self.line(self.message("notifications/cancelled", params), "notification/cancelled",
                         cancels=target)

    def wrong_type(self) -> Line:
        tool, arg = ARG_SLOTS[self.slot % len(ARG_SLOTS)]
        self.slot += 1
        value = self.rng.choice(WRONG[TOOLS[tool][arg]])
        return self.line(self.tool_call_obj(tool, arg, value), f"wrong-type/{tool}.{arg}")

    def missing_required(self) -> Line:
        tool = self.rng.choice([t for t in TOOLS if REQUIRED[t]])
        return self.line(self.tool_call_obj(tool, omit=REQUIRED[tool]), f"missing-required/{tool}")

    def extra_argument(self) -> Line:
        obj = self.tool_call_obj()
        obj["params"]["arguments"]["no_such_argument"] = self.rng.choice([1, "x", None, {}])
        return self.line(obj, "extra-argument")

    def params_shape(self) -> Line:
        r = self.rng
        method = r.choice(["ping", "tools/call", "tools/list", "logging/setLevel", "initialize", "foo/bar"])
        params = r.choice([[], [1], ["job_list", {}], 5, "s", None, True, False])
        kind = {list: "array", int: "number", str: "string", type(None): "null", bool: "bool"}[type(params)]
        return self.line(self.request(method, params), f"params={kind}/{method}")

    def meta_shape(self) -> Line:
        r = self.rng
        meta = r.choice([5, "x", [], None, True, {"progressToken": {}}, {"progressToken": None}])
        if r.random() < 0.6:
            obj = self.request("tools/call", {"name": "job_list", "arguments": {}, "_meta": meta})
        else:
            obj = self.request(r.choice(["ping", "tools/list"]), {"_meta": meta})
        kind = type(meta).__name__ if not isinstance(meta, dict) else "object"
        return self.line(obj, f"_meta={kind}/{obj['method']}")

    def name_shape(self) -> Line:
        r = self.rng
        name = r.choice([5, 1.5, None, [], {}, True, "", "no_such_tool", "JOB_LIST", " job_list", ...])
        params = {"arguments": {}}
        if name is not ...:
            params["name"] = name
        kind = "missing" if name is ... else type(name).__name__
        return self.line(self.request("tools/call", params), f"name={kind}/tools/call")

    def arguments_shape(self) -> Line:
        # Not the sentinel's id even here: a lenient host might read the array's first item.
        value = self.rng.choice([[], 5, "x", None, True, [{"job_id": "bash-2"}]])
        obj = self.request("tools/call", {"name": self.rng.choice(list(TOOLS)), "arguments": value})
        return self.line(obj, f"arguments={type(value).__name__}/tools/call")

    def unknown_method(self) -> Line:
        method = self.rng.choice([
            "foo", "", "tools/call/x", "resources/list", "resources/read", "prompts/list",
            "prompts/get", "completion/complete", "sampling/createMessage", "roots/list",
            "notifications/initialized", "$/cancelRequest", "rpc.discover", "Ping", "é✓", "m" * 300,
        ])
        return self.line(self.request(method, self.rng.choice([..., {}])), "unknown-method")

    def envelope(self) -> Line:
        r = self.rng
        obj = self.request("ping")
        what = r.choice(["jsonrpc=1.0", "jsonrpc=number", "jsonrpc=missing", "method=number",
                         "method=null", "method=missing", "method=array", "extra-member"])
        if what == "jsonrpc=1.0":
            obj["jsonrpc"] = "1.0"
        elif what == "jsonrpc=number":
            obj["jsonrpc"] = 2.0
        elif what == "jsonrpc=missing":
            del obj["jsonrpc"]
        elif what == "method=number":
            obj["method"] = 5
        elif what == "method=null":
            obj["method"] = None
        elif what == "method=missing":
            del obj["method"]
        elif what == "method=array":
            obj["method"] = ["ping"]
        else:
            obj["extra"] = {"x": 1}
        return self.line(obj, f"envelope/{what}")

    def bad_id(self) -> Line:
        r = self.rng
        bad = r.choice([{"a": 1}, [1], 1.5, 1.0, -2.5, True, False, None,
                        123456789012345678901234567890, Raw("1e400", float("inf"))])
        obj, _ = self.valid_request_obj()
        obj["id"] = bad
        kind = ("1e400" if isinstance(bad, Raw) else "bigint" if type(bad) is int
                else "null" if bad is None else type(bad).__name__)
        return self.line(obj, f"bad-id/{kind}")

    def deep_nesting(self) -> Line:
        r = self.rng
        arrays = Raw("[" * DEEP_NESTING + "]" * DEEP_NESTING, [])
        objects = Raw('{"a":' * DEEP_NESTING + "{}" + "}" * DEEP_NESTING, {})
        deep = r.choice([arrays, objects])
        kind = "arrays" if deep is arrays else "objects"
        where = r.choice(["params", "argument", "_meta", "id", "line"])
        if where == "line":
            return Line(deep.text.encode(), f"deep-{kind}/line", deep.shape)
        if where == "params":
            obj = self.request("ping", {"deep": deep})
        elif where == "argument":
            obj = self.tool_call_obj("job_list")
            obj["params"]["arguments"]["deep"] = deep
        elif where == "_meta":
            obj = self.request("tools/call", {"name": "job_list", "arguments": {}, "_meta": {"deep": deep}})
        else:
            obj = self.request("ping")
            obj["id"] = deep
        return self.line(obj, f"deep-{kind}/{where}")

    def huge_string(self) -> Line:
        r = self.rng
        text = r.choice(["x" * HUGE_STRING_CHARS, "é" * (HUGE_STRING_CHARS // 2),
                         '"\\' * (HUGE_STRING_CHARS // 2)])
        where = r.choice(["argument", "id", "method", "tool-name"])
        if where == "argument":
            # Not bash.command: every command this test sends is `true` or `echo x`.
            tool, arg = r.choice([(t, a) for t, a in ARG_SLOTS if TOOLS[t][a] == "string" and a != "command"])
            return self.line(self.tool_call_obj(tool, arg, text), f"huge-string/{tool}.{arg}")
        if where == "id":
            obj = self.message("ping", id=text)
        elif where == "method":
            obj = self.request(text)
        else:
            obj = self.request("tools/call", {"name": text, "arguments": {}})
        return self.line(obj, f"huge-string/{where}")

    def huge_number(self) -> Line:
        r = self.rng
        value = r.choice([Raw("1e400", float("inf")), Raw("-1e400", float("-inf")), 1e308,
                          123456789012345678901234567890, 2**64, -(2**64)])
        kind = value.text if isinstance(value, Raw) else repr(value)
        tool, arg = r.choice([(t, a) for t, a in ARG_SLOTS if TOOLS[t][a] in ("integer", "number")])
        return self.line(self.tool_call_obj(tool, arg, value), f"huge-number/{kind}")

    def invalid_utf8(self) -> Line:
        bad = self.rng.choice([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xc0\xaf", b"\xe2\x82", b"\x80"])
        obj = self.tool_call_obj("job_input", "text", "@@BAD@@")
        # Not JSON (JSON text is UTF-8), though a host that decodes lossily may
        # still answer the id.
        return Line(encode(obj).replace(b"@@BAD@@", bad), "invalid-utf8", extra_may=[obj["id"]])

    def truncated(self) -> Line:
        obj, _ = self.valid_request_obj()
        raw = encode(obj)
        # A strict prefix of a JSON object is never JSON (it lacks the closing brace).
        return Line(raw[: self.rng.randrange(1, len(raw))], "truncated")

    def batch(self) -> Line:
        r = self.rng
        items = []
        for _ in range(r.randint(0, 3)):
            items.append(self.valid_request_obj()[0] if r.random() < 0.7
                         else self.message("notifications/initialized"))
        return self.line(items, f"batch/{len(items)}")

    def response(self) -> Line:
        r = self.rng
        self.responses += 1
        # Mostly ids the host cannot confuse with anything; sometimes one of ours.
        if self.used_ids and r.random() < 0.2:
            rid = r.choice(self.used_ids)
        else:
            rid = r.choice([9_000_000 + self.responses, f"resp-{self.responses}"])
        kind = r.choice(["result", "error", "both", "neither"])
        obj = {"jsonrpc": "2.0", "id": rid}
        if kind in ("result", "both"):
            obj["result"] = {}
        if kind in ("error", "both"):
            obj["error"] = {"code": -32000, "message": "from the client"}
        return self.line(obj, f"response/{kind}")

    def non_object(self) -> Line:
        r = self.rng
        ping = self.request("ping")
        valid = encode(ping)
        raw = r.choice([b"42", b'"x"', b"null", b"true", b"", b"   ", b"\t",
                        b"\xef\xbb\xbf" + valid, valid + valid, valid + b" x"])
        try:
            shape = json.loads(raw.decode("utf-8")) if raw.strip() else NOT_JSON
        except ValueError:
            shape = NOT_JSON
        # A parser may skip a BOM (RFC 8259) or read the first of two values:
        # then the ping's id may be answered, though nothing is owed.
        return Line(raw, "non-object", shape, extra_may=[ping["id"]] if valid in raw else [])

    def lone_surrogate(self) -> Line:
        obj = self.tool_call_obj("job_input", "text", "a\ud800b")
        # \ud800 as an escape is JSON by the grammar; it is not a Unicode string.
        return Line(encode(obj, ascii_only=True), "lone-surrogate", shape_of(obj))

    def duplicate_keys(self) -> Line:
        a, b = self.request_id(), self.request_id()
        raw = (b'{"jsonrpc":"2.0","id":' + encode(a) + b',"id":' + encode(b)
               + b',"method":"ping"}')
        # Which id counts is up to the parser: an answer may carry either.
        return Line(raw, "duplicate-keys", {"jsonrpc": "2.0", "id": b, "method": "ping"},
                    extra_may=[a], demote=True)

    def crlf(self) -> Line:
        obj, tag = self.valid_request_obj()
        return Line(encode(obj) + b"\r", "crlf/" + tag, shape_of(obj))

    def handshake_noise(self) -> Line:
        """A line before the handshake completes: what a hasty client sends."""
        r = self.rng.random()
        if r < 0.3:
            return self.line(self.request("ping"), "pre-init/ping")
        if r < 0.45:
            return self.line(self.request("tools/list"), "pre-init/tools/list")
        if r < 0.6:
            return self.line(self.tool_call_obj("job_list"), "pre-init/tools/call")
        if r < 0.8:
            return self.line(self.message("notifications/cancelled", {"requestId": 424242}),
                             "pre-init/notification")
        return Line(self.truncated().raw, "pre-init/truncated")


def init_params() -> dict:
    return {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "mcp-fuzz", "version": "1"}}


def control(id: str, method: str, params=...) -> Line:
    msg = {"jsonrpc": "2.0", "id": id, "method": method}
    if params is not ...:
        msg["params"] = params
    return Line(encode(msg), "control/" + method, msg)


def reject_constant(name):
    raise ValueError(f"{name} is not JSON")


class Host:
    """One `jobs-host mcp` process and a reader thread that keeps every line it writes."""

    def __init__(self, binary: str, root: str):
        self.root = root
        self.tmpdir = os.path.join(root, "tmp")
        os.mkdir(self.tmpdir)
        self.stderr_path = os.path.join(root, "host-stderr.log")
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"),
               "HOME": os.environ.get("HOME") or root,
               "TMPDIR": self.tmpdir,
               "RUST_BACKTRACE": "1"}
        with open(self.stderr_path, "wb") as err:
            self.proc = subprocess.Popen([binary, "mcp", "--extensions", "all"], cwd=root, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        self.cv = threading.Condition()
        self.write_lock = threading.Lock()
        self.outputs: list[bytes] = []
        self.answers: dict[tuple, list[tuple[int, dict]]] = {}
        self.nulls: list[int] = []
        self.noids: list[int] = []
        self.bad: list[tuple[int, str]] = []
        self.notifications = 0
        self.server_requests: list[int] = []
        self.eof = False
        self.last_output = time.monotonic()
        self.broken = False  # a write found stdin closed: the host is gone
        self.sent = 0
        self.stalled = False  # a write waited WRITE_TIMEOUT for the host to read
        self.fd = self.proc.stdin.fileno()
        os.set_blocking(self.fd, False)  # writes go through os.write, never proc.stdin's buffer
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self):
        for raw in iter(self.proc.stdout.readline, b""):
            text = raw[:-1] if raw.endswith(b"\n") else raw
            try:
                msg, error = json.loads(text.decode("utf-8"), parse_constant=reject_constant), None
            except Exception as e:  # not UTF-8, not JSON, or too deep for Python
                msg, error = None, f"not JSON: {e}"
            with self.cv:
                idx = len(self.outputs)
                self.outputs.append(text)
                self.last_output = time.monotonic()
                if error:
                    self.bad.append((idx, error))
                elif isinstance(msg, list):
                    if not msg:
                        self.bad.append((idx, "an empty array"))
                    for m in msg:
                        self._classify(idx, m)
                else:
                    self._classify(idx, msg)
                self.cv.notify_all()
        with self.cv:
            self.eof = True
            self.cv.notify_all()

    def _classify(self, idx: int, m: object):
        if not isinstance(m, dict):
            self.bad.append((idx, "not an object"))
            return
        if m.get("jsonrpc") != "2.0":
            self.bad.append((idx, 'no "jsonrpc": "2.0"'))
        if "method" in m:
            if type(m["method"]) is not str:
                self.bad.append((idx, "method is not a string"))
            elif "id" in m:
                self.server_requests.append(idx)
            else:
                self.notifications += 1
            return
        has_result, has_error = "result" in m, "error" in m
        if has_result == has_error:
            self.bad.append((idx, "a response needs exactly one of result and error"))
            return
        if has_error:
            e = m["error"]
            if not (isinstance(e, dict) and type(e.get("code")) is int and isinstance(e.get("message"), str)):
                self.bad.append((idx, "malformed error object"))
        if "id" not in m:
            self.noids.append(idx)
        elif m["id"] is None:
            if has_result:
                self.bad.append((idx, "a result with id null"))
            self.nulls.append(idx)
        else:
            self.answers.setdefault(id_key(m["id"]), []).append((idx, m))

    def send(self, raw: bytes) -> bool:
        """Writes one line. Never blocks for long: the pipe is non-blocking, and a
        host that has exited (its jobs may still hold the pipe open) or has not
        read for WRITE_TIMEOUT ends the writing for good."""
        view = memoryview(raw + b"\n")
        with self.write_lock:
            end = time.monotonic() + WRITE_TIMEOUT
            while view and not self.broken:
                if self.proc.poll() is not None:
                    self.broken = True
                elif time.monotonic() > end:
                    self.broken = self.stalled = True
                elif select.select([], [self.fd], [], 0.2)[1]:
                    try:
                        view = view[os.write(self.fd, view):]
                    except BlockingIOError:
                        pass
                    except OSError:
                        self.broken = True
            if self.broken:
                return False
            self.sent += 1
            return True

    def wait_until(self, pred, deadline: float) -> bool:
        with self.cv:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.cv.wait(min(left, 0.2))
            return True

    def answer(self, id: str, timeout: float) -> dict | None:
        key = ("s", id)
        ok = self.wait_until(lambda: key in self.answers or self.eof, time.monotonic() + timeout)
        with self.cv:
            got = self.answers.get(key)
            return got[0][1] if ok and got else None

    def close_stdin(self):
        with self.write_lock:
            self.broken = True
            try:
                self.proc.stdin.close()
            except OSError:
                pass

    def stop(self, timeout: float) -> int | None:
        """Closes stdin and waits for the exit; kills the host if it does not exit."""
        self.close_stdin()
        try:
            code = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            code = None
            self.proc.kill()
            self.proc.wait()
        self.reader.join(5)
        if not self.reader.is_alive():
            self.proc.stdout.close()  # a run starts hundreds of hosts: do not keep their pipes
        return code

    def stderr_tail(self, n: int = 15) -> list[str]:
        try:
            with open(self.stderr_path, "rb") as f:
                return [clip(l.rstrip(b"\n")) for l in f.read().splitlines()[-n:]]
        except OSError:
            return []


def result_text(msg: dict | None) -> str:
    try:
        return "\n".join(c.get("text", "") for c in msg["result"]["content"])
    except (KeyError, TypeError, AttributeError):
        return ""


def pid_alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            stat = f.read()
    except OSError:
        return False
    state = stat[stat.rfind(b")") + 2: stat.rfind(b")") + 3]
    return state not in (b"Z", b"X")


def marked_processes(marker: bytes) -> list[tuple[int, str]]:
    """Live processes whose environment has this session's TMPDIR: the host
    passes TMPDIR on to every job, so these are what the session left behind."""
    found = []
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                if marker not in f.read().split(b"\0"):
                    continue
            with open(f"/proc/{name}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ").decode("utf-8", "replace").strip()
        except OSError:
            continue
        if pid_alive(int(name)):
            found.append((int(name), cmd))
    return found


@dataclass
class Problem:
    kind: str
    tag: str
    note: str
    line: Line | None = None
    answer: bytes | None = None


@dataclass
class SessionResult:
    index: int
    lines_sent: int = 0
    lines_planned: int = 0
    owed: int = 0
    answers: int = 0
    lost: int = 0
    extra: int = 0
    nulls: int = 0
    may_null: int = 0
    noids: int = 0
    notifications: int = 0
    relaxed: int = 0
    early_exit: bool = False
    exit_code: int | None = None
    survivors: list = field(default_factory=list)
    seconds: float = 0.0
    problems: list[Problem] = field(default_factory=list)
    stderr_tail: list[str] = field(default_factory=list)
    phases: dict = field(default_factory=dict)  # seconds per phase, to see where a slow run goes

    @property
    def passed(self) -> bool:
        return not self.problems


def plan_session(rng: random.Random, n_lines: int, pidfile: str) -> tuple[list[Line], dict]:
    """All of one session's lines in order, and where the control lines sit."""
    gen = Generator(rng)
    pre = [gen.handshake_noise() for _ in range(rng.choice([0, 0, 1, 3]))]
    mid = [gen.handshake_noise() for _ in range(rng.choice([0, 0, 1, 2]))]
    body_n = max(0, n_lines - len(pre) - len(mid))
    lines = list(pre)
    at = {"init": len(lines)}
    lines.append(control("fuzz-init", "initialize", init_params()))
    lines.extend(mid)
    at["initialized"] = len(lines)
    lines.append(Line(b'{"jsonrpc":"2.0","method":"notifications/initialized"}', "control/initialized",
                      {"jsonrpc": "2.0", "method": "notifications/initialized"}))
    at["sentinel"] = len(lines)
    command = f"echo $$ > {shlex.quote(pidfile)}; exec sleep 300"
    lines.append(control("fuzz-sentinel", "tools/call", {"name": "bash", "arguments": {"command": command}}))
    at["body"] = len(lines)
    lines.extend(gen.next_line() for _ in range(body_n))
    at["final"] = len(lines)
    lines.append(control("fuzz-final", "tools/call", {"name": "job_list", "arguments": {}}))
    return lines, at


def run_session(index: int, n_lines: int, seed: int, binary: str, deadline: float, keep: bool,
                transcript: str | None) -> SessionResult:
    res = SessionResult(index)
    started = time.monotonic()
    root = tempfile.mkdtemp(prefix=f"mcp-fuzz-{index}-")
    pidfile = os.path.join(root, "sentinel.pid")
    # One Random per session, seeded from the run's seed: a session replays alone.
    lines, at = plan_session(random.Random(seed * 1_000_003 + index), n_lines, pidfile)
    ledger = Ledger(lines)
    res.lines_planned, res.owed, res.may_null, res.relaxed = len(lines), ledger.total_owed(), ledger.may_null, ledger.relaxed
    host = Host(binary, root)
    problem = lambda kind, note, line=None, answer=None, tag=None: res.problems.append(
        Problem(kind, tag or (line.tag if line else "-"), note, line, answer))
    sentinel_pid = None
    clock = [time.monotonic()]

    def phase(name):
        now = time.monotonic()
        res.phases[name] = res.phases.get(name, 0.0) + now - clock[0]
        clock[0] = now

    try:
        def send_range(a, b):
            for i in range(a, b):
                if time.monotonic() > deadline or not host.send(lines[i].raw):
                    return False
            return True

        def step_deadline(timeout):
            return min(deadline, time.monotonic() + timeout)

        # Handshake, with whatever noise the plan puts around it.
        send_range(0, at["init"] + 1)
        init = host.answer("fuzz-init", max(0.0, step_deadline(HANDSHAKE_TIMEOUT) - time.monotonic()))
        if init is None or "result" not in init:
            problem("handshake", f"no initialize result: {clip(json.dumps(init))}", lines[at["init"]])
        send_range(at["init"] + 1, at["sentinel"] + 1)
        started_job = host.answer("fuzz-sentinel", CALL_TIMEOUT)
        if SENTINEL_JOB not in result_text(started_job):
            problem("sentinel", f"the sentinel did not start as {SENTINEL_JOB}: {clip(json.dumps(started_job))}",
                    lines[at["sentinel"]])
        else:
            # The job writes its pid, then execs sleep in the same process.
            until = time.monotonic() + 5
            while time.monotonic() < until:
                try:
                    pid = int(open(pidfile).read().strip())
                    if b"sleep" in open(f"/proc/{pid}/cmdline", "rb").read():
                        sentinel_pid = pid
                        break
                except (OSError, ValueError):
                    pass
                time.sleep(0.02)
            if sentinel_pid is None:
                problem("sentinel", "the sentinel's sleep process was never seen")

        phase("handshake")
        # The body is written from a thread while the reader collects answers.
        writer = threading.Thread(target=send_range, args=(at["body"], at["final"]), daemon=True)
        writer.start()
        writer.join(max(0.0, deadline - time.monotonic()))
        if writer.is_alive():
            problem("deadline", f"the overall deadline passed while writing (line {host.sent} of {len(lines)})")
            host.proc.kill()
            writer.join(5)

        phase("write")
        # Let every owed answer arrive (the final job_list is not sent yet).
        final_key = ("s", "fuzz-final")

        def settled():
            return host.eof or all(len(host.answers.get(k, ())) >= len(v)
                                   for k, v in ledger.owed.items() if k != final_key)
        # Bounded twice: SETTLE_TIMEOUT in all, and SETTLE_QUIET without any new
        # line (an answer that is lost would otherwise cost the whole bound).
        settle_end = step_deadline(SETTLE_TIMEOUT)
        while True:
            with host.cv:
                quiet_end = host.last_output + SETTLE_QUIET
            if host.wait_until(settled, min(settle_end, quiet_end)):
                break
            with host.cv:
                if time.monotonic() >= min(settle_end, host.last_output + SETTLE_QUIET):
                    break
        if time.monotonic() > deadline:
            problem("deadline", "the overall deadline passed while waiting for answers")

        phase("settle")
        # The sentinel must still be listed after all of that.
        if host.send(lines[at["final"]].raw):
            final = host.answer("fuzz-final", CALL_TIMEOUT)
            if SENTINEL_JOB not in result_text(final):
                problem("final-job-list", f"job_list does not show {SENTINEL_JOB}: {clip(json.dumps(final))}",
                        lines[at["final"]])
        if host.stalled:
            problem("write-stall", f"the host read nothing for {WRITE_TIMEOUT:.0f} s (at line {host.sent + 1})",
                    lines[host.sent] if host.sent < len(lines) else None)
        res.early_exit = not host.stalled and (host.broken or host.eof or host.proc.poll() is not None)
        if res.early_exit:
            with host.write_lock:
                last = host.sent
            recent = " | ".join(clip(l.raw, 120) for l in lines[max(0, last - 3):last])
            problem("early-exit", f"the host exited before stdin closed, after line {last}; "
                    f"last lines written: {recent}", lines[last - 1] if last else None, tag="early-exit")
    except Exception as e:  # a bug of this script must fail the session, not skip its cleanup
        problem("fuzzer-error", f"{type(e).__name__}: {e}")
    finally:
        phase("final")
        res.exit_code = host.stop(EXIT_TIMEOUT)
        res.lines_sent = host.sent
        phase("exit")
    if res.exit_code is None:
        problem("exit", f"the host did not exit within {EXIT_TIMEOUT:.0f} s of stdin closing (killed)")
    elif res.exit_code != 0:
        problem("exit", f"the host exited with status {res.exit_code}")

    # Nothing of the session may outlive it: the sentinel, or any other job.
    marker = b"TMPDIR=" + host.tmpdir.encode()
    until = time.monotonic() + GONE_TIMEOUT
    while True:
        alive = marked_processes(marker)
        sentinel_alive = sentinel_pid is not None and pid_alive(sentinel_pid)
        if (not alive and not sentinel_alive) or time.monotonic() > until:
            break
        time.sleep(0.1)
    if sentinel_alive:
        problem("survivor", f"the sentinel (pid {sentinel_pid}) is alive {GONE_TIMEOUT:.0f} s after the host exited")
        if sentinel_pid not in {p for p, _ in alive}:
            res.survivors.append((sentinel_pid, "the sentinel"))
    for pid, cmd in alive:
        res.survivors.append((pid, cmd))
        if pid != sentinel_pid:
            problem("survivor", f"pid {pid} ({clip(cmd, 100)}) outlived the host")
    for pid in {p for p, _ in alive} | ({sentinel_pid} if sentinel_alive else set()):
        try:
            os.kill(pid, signal.SIGKILL)  # ours (a job of our host): do not leak it into CI
        except OSError:
            pass
    try:
        spill = [n for n in os.listdir(host.tmpdir) if n.startswith("jobs-host-")]
    except OSError:
        spill = []
    if spill:
        problem("spill-dir", f"left in TMPDIR: {', '.join(spill)}")
    phase("gone")

    check_answers(res, lines, ledger, host, binary)
    if transcript:
        # What was sent (replayable with `cat session-N.in | jobs-host mcp ...`) and what came back.
        os.makedirs(transcript, exist_ok=True)
        with open(os.path.join(transcript, f"session-{index}.in"), "wb") as f:
            f.writelines(l.raw + b"\n" for l in lines[: res.lines_sent])
        with open(os.path.join(transcript, f"session-{index}.out"), "wb") as f:
            f.writelines(o + b"\n" for o in host.outputs)
    phase("check")
    res.stderr_tail = host.stderr_tail()
    res.seconds = time.monotonic() - started
    if not keep:
        shutil.rmtree(root, ignore_errors=True)
    return res


def check_answers(res: SessionResult, lines: list[Line], ledger: Ledger, host: Host, binary: str):
    """Matches what came back against the ledger."""
    problem = lambda kind, note, line=None, answer=None, tag=None: res.problems.append(
        Problem(kind, tag or (line.tag if line else "-"), note, line, answer))

    def lost(key, i, note, tag=None):
        if res.early_exit:
            return  # counted; reported once below, as a consequence of the exit
        if key[0] == "i" and key[1] >= 2**63:
            tag = "id-above-i64"  # within u64 but not i64: the id is the likely cause, whatever the line
        problem("lost-answer", note, lines[i], tag=tag)
    with host.cv:
        answers = {k: list(v) for k, v in host.answers.items()}
        outputs = host.outputs
    unsent = set(range(res.lines_sent, len(lines)))
    res.answers = sum(len(v) for v in answers.values())
    res.nulls, res.noids, res.notifications = len(host.nulls), len(host.noids), host.notifications
    ambiguous = []  # (key, owed line indexes, answers got) for reused ids that lost answers
    for key in sorted(set(ledger.owed) | set(ledger.may) | set(answers), key=repr):
        owed = [i for i in ledger.owed.get(key, []) if i not in unsent]
        may = [i for i in ledger.may.get(key, []) if i not in unsent]
        got = answers.get(key, [])
        if len(got) < len(owed):
            res.lost += len(owed) - len(got)
            if len(owed) == 1:
                lost(key, owed[0], f"no answer with id {show_id(key)}")
            else:
                ambiguous.append((key, owed, len(got)))
        elif len(got) > len(owed) + len(may):
            res.extra += len(got) - len(owed) - len(may)
            first = (owed + may or [None])[0]
            problem("extra-answer", f"{len(got)} answers with id {show_id(key)}, at most {len(owed) + len(may)} expected",
                    lines[first] if first is not None else None, outputs[got[-1][0]], tag="unrequested-id")
    # A reused id: answers carry nothing else to tell which request went
    # unanswered, so a fresh host is asked about each candidate alone.
    candidates = [] if res.early_exit else [i for _, owed, _ in ambiguous for i in owed][:MAX_ISOLATED]
    alone = ({i: ok for i, (ok, _) in zip(candidates, isolate(binary, [lines[i] for i in candidates]))
              if ok is not None} if candidates else {})
    for key, owed, got in ambiguous:
        note = (f"id {show_id(key)} was sent in {len(owed)} requests, {got} answered "
                f"({', '.join(lines[i].tag for i in owed)})")
        missing = len(owed) - got
        blamed = [i for i in owed if alone.get(i) is False][:missing]
        for i in blamed:
            lost(key, i, note + "; unanswered on a fresh host too")
        rest = [i for i in reversed(owed) if i not in blamed][: missing - len(blamed)]
        for i in rest:
            if all(alone.get(j) is True for j in owed):
                # Each one is answered alone: the loss comes from the reuse itself.
                lost(key, i, note + "; each is answered alone", "reused-id")
            else:
                lost(key, i, note + "; not isolated", "reused-id-unattributed")
    if res.early_exit and res.lost:
        problem("lost-answer", f"{res.lost} answers lost: the host exited before stdin closed", tag="after-early-exit")
    # A lost answer may have come back with id null: only more than that is excess.
    excess = len(host.nulls) - ledger.may_null - res.lost
    if excess > 0:
        res.extra += excess
        problem("null-id-excess", f"{len(host.nulls)} errors with id null for {ledger.may_null} lines that could not carry an id",
                answer=outputs[host.nulls[-1]], tag="null-id")
    if host.noids or excess > 0:
        # Neither can be traced to a line by its id: one line of each kind (and
        # each line with an id above i64) goes to a fresh host, alone.
        sample, tags = [], set()
        for i, line in enumerate(lines[: res.lines_sent]):
            if (line.tag not in tags or big_id(line)) and not line.tag.startswith("control/"):
                tags.add(line.tag)
                sample.append(line)
        explained = False
        earlier: set[tuple] = set()  # ids of lines sent before: a late answer of theirs is not this line's
        for line, (_, out) in zip(sample, isolate(binary, sample, wait_for_answer=False)):
            owed, may, may_null = expectation(line)
            if owed is None and not may and not may_null:
                # A well-formed notification or response: nothing may answer it.
                for raw in unsolicited(out, with_id=True, ignore=earlier):
                    explained = True
                    problem("answered-notification", "a well-formed notification or response, sent alone to "
                            "a fresh host, was answered", line, raw)
                continue
            earlier.update([owed] if owed else [], may)
            for raw in unsolicited(out, with_id=False):
                explained = True
                problem("response-without-id", f"{len(host.noids)} responses in the session had no id member; "
                        "this line, sent alone to a fresh host, gets one", line, raw,
                        tag="id-above-i64" if big_id(line) else None)
        if host.noids and not explained:
            problem("response-without-id", f"{len(host.noids)} responses have no id member (no single line reproduces it)",
                    answer=outputs[host.noids[0]], tag="response-without-id")
    for idx, why in host.bad[:20]:
        problem("invalid-output", why, answer=outputs[idx], tag="invalid-output")
    for idx in host.server_requests[:5]:
        problem("server-request", "the host sent a request (this client declared no capabilities)",
                answer=outputs[idx], tag="server-request")


def isolate(binary: str, candidates: list[Line],
            wait_for_answer: bool = True) -> list[tuple[bool | None, list[bytes]]]:
    """For each line, sent alone (in order) to one fresh host: whether an answer
    with its id came (None: not tried, the time budget ran out), and every line
    the host wrote for it. A ping after each line bounds the wait; with
    `wait_for_answer`, a line whose answer has not come by then gets
    ISOLATE_GRACE more (its waits are at most 50 ms)."""
    end = min(run_deadline, time.monotonic() + ISOLATE_BUDGET)
    if time.monotonic() >= end:
        return [(None, [])] * len(candidates)
    root = tempfile.mkdtemp(prefix="mcp-fuzz-isolate-")
    host = Host(binary, root)
    found = []
    try:
        host.send(control("fuzz-init", "initialize", init_params()).raw)
        if host.answer("fuzz-init", min(HANDSHAKE_TIMEOUT, end - time.monotonic())) is None:
            candidates = []
        host.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        for n, line in enumerate(candidates):
            if time.monotonic() >= end or host.broken:
                break
            s = line.shape
            key = id_key(s["id"]) if isinstance(s, dict) and valid_id(s.get("id")) else None
            with host.cv:
                mark = len(host.outputs)
            host.send(line.raw)
            host.send(control(f"fuzz-probe-{n}", "ping").raw)
            host.answer(f"fuzz-probe-{n}", REPLAY_TIMEOUT)
            got = lambda: key is not None and any(i >= mark for i, _ in host.answers.get(key, []))
            host.wait_until(lambda: got() or host.eof,
                            time.monotonic() + (ISOLATE_GRACE if wait_for_answer and key is not None else 0.02))
            with host.cv:
                probe = {i for i, _ in host.answers.get(("s", f"fuzz-probe-{n}"), [])}
                found.append((got(), [host.outputs[i] for i in range(mark, len(host.outputs)) if i not in probe]))
    finally:
        host.stop(10)
        shutil.rmtree(root, ignore_errors=True)
    return found + [(None, [])] * (len(candidates) - len(found))


def big_id(line: Line) -> bool:
    """An integer id above i64 (within u64: the framing layer takes it as an id)."""
    s = line.shape
    return isinstance(s, dict) and type(s.get("id")) is int and 2**63 <= s["id"] < 2**64


def unsolicited(outputs: list[bytes], with_id: bool, ignore: set = frozenset()) -> list[bytes]:
    """The responses among these lines that have no id member (or, with
    `with_id`, any response at all but those with an id in `ignore`)."""
    found = []
    for raw in outputs:
        try:
            msgs = json.loads(raw)
        except ValueError:
            continue
        for m in msgs if isinstance(msgs, list) else [msgs]:
            if not isinstance(m, dict) or not ("result" in m or "error" in m):
                continue
            if "id" not in m or (with_id and not (valid_id(m["id"]) and id_key(m["id"]) in ignore)):
                found.append(raw)
    return found


def replay(binary: str, line: Line) -> list[bytes]:
    """What a fresh host answers to this one line after a clean handshake."""
    root = tempfile.mkdtemp(prefix="mcp-fuzz-replay-")
    host = Host(binary, root)
    out: list[bytes] = []
    try:
        host.send(control("fuzz-init", "initialize", init_params()).raw)
        if host.answer("fuzz-init", min(HANDSHAKE_TIMEOUT, max(0.0, run_deadline - time.monotonic()))) is None:
            out.append(b"(no initialize answer)")
        else:
            host.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
            with host.cv:
                mark = len(host.outputs)
            host.send(line.raw)
            # A ping after the line bounds the wait: its answer comes after the line's.
            host.send(control("fuzz-probe", "ping").raw)
            host.answer("fuzz-probe", REPLAY_TIMEOUT)
            time.sleep(0.2)
            with host.cv:
                probe = {i for i, _ in host.answers.get(("s", "fuzz-probe"), [])}
                out += [host.outputs[i] for i in range(mark, len(host.outputs)) if i not in probe]
            if not out:
                out.append(b"(nothing)")
    finally:
        code = host.stop(10)
        shutil.rmtree(root, ignore_errors=True)
    if code != 0:
        out.append(f"(host exit status {code})".encode())
    return out


def report(results: list[SessionResult], binary: str, args, elapsed: float):
    print()
    for r in results:
        print(f"session {r.index}: {'PASS' if r.passed else 'FAIL'}  lines {r.lines_sent}/{r.lines_planned}"
              f"  owed {r.owed}  answers {r.answers}  lost {r.lost}  extra {r.extra}"
              f"  null-id {r.nulls} (allowed {r.may_null})  no-id {r.noids}  notices {r.notifications}"
              f"  early-exit {'yes' if r.early_exit else 'no'}  exit {r.exit_code}"
              f"  survivors {len(r.survivors)}  {r.seconds:.1f}s"
              f" ({', '.join(f'{k} {v:.1f}' for k, v in r.phases.items())})")
    tot = lambda a: sum(getattr(r, a) for r in results)
    print(f"total: sessions {len(results)}  lines {tot('lines_sent')}  owed {tot('owed')}  answers {tot('answers')}"
          f"  lost {tot('lost')}  extra {tot('extra')}  null-id {tot('nulls')}  no-id {tot('noids')}"
          f"  ended early {sum(r.early_exit for r in results)}  survivors {sum(len(r.survivors) for r in results)}"
          f"  cancel-relaxed {tot('relaxed')}  {elapsed:.1f}s")

    failures = [(r.index, p) for r in results for p in r.problems]
    if not failures:
        return
    print(f"\nfirst failures (of {len(failures)}):")
    for idx, p in failures[: args.show]:
        print(f"  [session {idx}] {p.kind} ({p.tag}): {p.note}")
        if p.line is not None:
            print(f"      line:   {clip(p.line.raw)}")
        if p.answer is not None:
            print(f"      answer: {clip(p.answer)}")

    # The same failure from many lines is one thing to fix: group by what the
    # generator meant to test, and show what a fresh host answers to one example.
    # A family is the tag's first part ("deep-arrays/params" -> "deep-arrays"),
    # except for valid traffic and notifications, where the method is the point.
    def family(tag):
        parts = tag.split("/")
        return tag if parts[0] in ("valid", "notification", "pre-init", "crlf") else parts[0]
    classes: dict[tuple, list] = {}
    for idx, p in failures:
        classes.setdefault((p.kind, family(p.tag)), []).append((idx, p))
    print(f"\nfailure classes ({len(classes)}):")
    replays = 0
    for (kind, fam), items in sorted(classes.items(), key=lambda kv: -len(kv[1])):
        idx, p = items[0]
        tags: dict[str, int] = {}
        for _, q in items:
            tags[q.tag] = tags.get(q.tag, 0) + 1
        sessions = len({i for i, _ in items})
        print(f"  {len(items):5d} x {kind} ({fam}) in {sessions} session(s): {p.note}")
        if len(tags) > 1 or p.tag != fam:
            print(f"        tags: {', '.join(f'{t} {n}' for t, n in sorted(tags.items(), key=lambda kv: -kv[1]))}")
        if p.line is not None:
            print(f"        e.g. line: {clip(p.line.raw)}")
            if (replays < args.replay and time.monotonic() < run_deadline
                    and kind in ("lost-answer", "extra-answer", "response-without-id", "answered-notification")):
                replays += 1
                for out in replay(binary, p.line)[:3]:
                    print(f"        fresh host answers: {clip(out)}")
        if p.answer is not None:
            print(f"        answer: {clip(p.answer)}")
    for r in results:
        if not r.passed and r.stderr_tail and any(p.kind in ("early-exit", "exit", "fuzzer-error") for p in r.problems):
            print(f"\nsession {r.index} host stderr (tail):")
            for l in r.stderr_tail:
                print(f"  {l}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, default=2000, help="lines to send in all (default 2000)")
    ap.add_argument("--seed", type=int, default=1, help="the run's seed (default 1)")
    ap.add_argument("--session-lines", type=int, default=1000, help="lines per host process (default 1000)")
    ap.add_argument("--deadline", type=float, default=None,
                    help="bound on the whole run in seconds (default 120 s + 4.8 ms per line: 10 min for 100,000)")
    ap.add_argument("--show", type=int, default=10, help="failures to print in full (default 10)")
    ap.add_argument("--replay", type=int, default=12,
                    help="failure classes whose example is replayed on a fresh host (default 12)")
    ap.add_argument("--transcript", metavar="DIR", help="write each session's lines sent and received to DIR")
    ap.add_argument("--keep-tmp", action="store_true", help="keep each session's temp directory")
    args = ap.parse_args()

    binary = os.environ.get("JOBS_HOST_BIN") or os.path.join(REPO_ROOT, "target", "debug", "jobs-host")
    if not os.access(binary, os.X_OK):
        print(f"mcp_fuzz: no server at {binary} (cargo build -p jobs-host, or set JOBS_HOST_BIN)", file=sys.stderr)
        return 2
    budget = args.deadline if args.deadline is not None else 120 + 0.0048 * args.lines
    global run_deadline
    start = time.monotonic()
    deadline = run_deadline = start + budget
    n_sessions = max(1, -(-args.lines // args.session_lines))
    sizes = [args.lines // n_sessions + (i < args.lines % n_sessions) for i in range(n_sessions)]
    print(f"mcp_fuzz: {binary}, seed {args.seed}, {args.lines} lines in {n_sessions} sessions, "
          f"deadline {budget:.0f}s", flush=True)

    results = []
    for i, n in enumerate(sizes, 1):
        if time.monotonic() > deadline:
            r = SessionResult(i)
            r.problems.append(Problem("deadline", "-", "not run: the overall deadline had passed"))
            results.append(r)
            continue
        r = run_session(i, n, args.seed, binary, deadline, args.keep_tmp, args.transcript)
        results.append(r)
        print(f"  session {i}/{n_sessions}: {'pass' if r.passed else f'FAIL ({len(r.problems)} problems)'} "
              f"in {r.seconds:.1f}s", flush=True)
    report(results, binary, args, time.monotonic() - start)
    failed = sum(not r.passed for r in results)
    if failed:
        print(f"\nreproduce: python3 tests/fuzz/mcp_fuzz.py --lines {args.lines} --seed {args.seed} "
              f"--session-lines {args.session_lines} --transcript DIR")
    print(f"fuzz: {len(results) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
