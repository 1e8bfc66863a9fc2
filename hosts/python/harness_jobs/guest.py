"""The tool-jobs component (WIT `harness:jobs@0.9.0`) loaded with wasmtime-py.

`Guest` is the low-level binding: it links the imports the component needs
(the owner-scoped registry, the clock and the log) to a Python *backend* and
calls the exports. Every call runs in a fresh instance, so the guest keeps
nothing between calls. Values cross as plain Python: dicts for records, strings
for enums, ``None`` for absent options.

A backend is any object with these methods, each answering for one caller
(``caller`` is whatever the harness passed to the call):

    list_jobs(caller) -> list[job]
    get(caller, job_id) -> job                       # or raise RegistryError
    read(caller, job_id) -> (text, job)              # or raise RegistryError
    kill(caller, job_id, reason) -> "requested" | "already-finished"
    output(caller, job_id, window) -> dict(head=, tail=, omitted_bytes=, job=)
    now_ms() -> int

and, for the opt-in extensions (a backend without them answers ``unsupported``):

    write_input(caller, job_id, data, close) -> int
    signal(caller, job_id, name)                     # "int", "term", "hup", ...
    lines(caller, job_id, query) -> dict(lines=, hits=, total_matches=, extents=, stopped= (optional), job=)
    ports(caller, job_id) -> list[dict(address=, port=)]

where ``job`` is a dict with the WIT `job-snapshot` fields in snake case
(``id, kind, label, status, detail, started_at, finished_at,
output_limit_bytes, reported``).
"""

from __future__ import annotations

import itertools
import json
import logging
from collections.abc import Callable
from os import PathLike
from typing import Any, Literal, cast

import wasmtime
from wasmtime import component as wc
from wasmtime.component import Record, ResourceHost, ResourceType, Variant

from .types import (
    Backend,
    ContentBlock,
    Delivery,
    GuestConfig,
    JobSnapshot,
    Notice,
    OutputLine,
    OwnerState,
    PromptSection,
    RegistryErrorKind,
    ToolAnnotations,
    ToolDefinition,
    ToolResult,
    UiCard,
    WaitOutcome,
    WaitRequest,
)

PACKAGE = "harness:jobs"
VERSION = "0.9.0"
SCOPE_TYPE = 1
log = logging.getLogger("harness_jobs.guest")

Step = tuple[Literal["done"], ToolResult] | tuple[Literal["wait"], WaitRequest]
"""One step of a call: ``("done", result)`` or ``("wait", request)``."""


class RegistryError(Exception):
    """An expected registry failure: ``kind`` is a WIT ``registry-error`` case
    (``unknown-job``, ``foreign-job``, ``wait-aborted``, ``producer-failed``,
    ``invalid-pattern``, ``no-input``, ``input-closed``, ``unsupported``, ``no-terminal``)."""

    def __init__(self, kind: RegistryErrorKind, payload: str | None = None) -> None:
        super().__init__(f"{kind}: {payload}" if payload is not None else kind)
        self.kind: RegistryErrorKind = kind
        self.payload = payload


class GuestError(Exception):
    """The component trapped or answered something the WIT does not allow."""


def _record(**fields: Any) -> Record:
    r = Record()
    for key, value in fields.items():
        setattr(r, key.replace("_", "-"), value)
    return r


def _annotations(a: Any) -> ToolAnnotations:
    """MCP tool annotations, spelled as MCP spells them."""
    return {
        "title": a.title,
        "readOnlyHint": getattr(a, "read-only-hint"),
        "destructiveHint": getattr(a, "destructive-hint"),
        "idempotentHint": getattr(a, "idempotent-hint"),
        "openWorldHint": getattr(a, "open-world-hint"),
    }


def _plain(value: Any) -> Any:
    """A lifted WIT value as plain Python (records become dicts, snake case)."""
    if isinstance(value, Record):
        return {k.replace("-", "_"): _plain(v) for k, v in vars(value).items()}
    if isinstance(value, Variant):
        return {"tag": value.tag, "payload": _plain(value.payload)}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _definition(d: Any) -> ToolDefinition:
    """A tool definition with its schemas parsed."""
    output_schema = getattr(d, "output-schema")
    return {
        "name": d.name,
        "description": d.description,
        "input_schema": json.loads(getattr(d, "input-schema")),
        "output_schema": None if output_schema is None else json.loads(output_schema),
        "annotations": _annotations(d.annotations),
    }


def _result(r: Any) -> ToolResult:
    """A WIT tool-result as a dict, its value parsed."""
    value = r.value
    return {"text": r.text, "is_error": getattr(r, "is-error"), "value": None if value is None else json.loads(value)}


def snapshot_record(job: JobSnapshot) -> Record:
    finished_at = job.get("finished_at")
    return _record(
        id=job["id"],
        kind=job["kind"],
        label=job["label"],
        status=job["status"],
        detail=job.get("detail"),
        started_at=int(job["started_at"]),
        finished_at=None if finished_at is None else int(finished_at),
        output_limit_bytes=job.get("output_limit_bytes"),
        reported=bool(job.get("reported")),
        sandbox=sandbox_record(job.get("sandbox")),
        placement=job.get("placement"),
    )


def sandbox_record(plain: Any) -> Record | None:
    """A sandbox as a config writes it (``{"files": ..., "network": "on" | "off" |
    [port, ...]}``) as a WIT record; ``None`` for none."""
    if not plain:
        return None
    network = plain["network"]
    return _record(
        files=plain["files"],
        network=Variant("ports", list(network)) if isinstance(network, list) else Variant(network, None),
    )


def sandbox_plain(record: Any) -> dict[str, Any] | None:
    """:func:`sandbox_record`'s form back."""
    if record is None:
        return None
    network = record.network
    return {
        "files": record.files,
        "network": list(network.payload) if network.tag == "ports" else network.tag,
    }


BARE_ERRORS = {"wait-aborted", "no-input", "input-closed"}


def error_variant(error: RegistryError) -> Variant:
    if error.kind in BARE_ERRORS:
        return Variant(error.kind)
    return Variant(error.kind, str(error.payload or ""))


def line_record(line: OutputLine) -> Record:
    return _record(stream=line["stream"], number=int(line["number"]), text=line["text"])


def waited_record(waited: JobSnapshot | WaitOutcome) -> Record:
    """A wait's outcome for ``resume``: a job dict (ended by settling or the
    timeout), or a dict with ``job``, ``end``, ``matched`` and ``prompt``."""
    w = cast(dict[str, Any], waited)
    job = cast(JobSnapshot, w.get("job", w) if "end" in w or "job" in w else w)
    terminal = job["status"] in ("completed", "killed", "failed")
    end = w.get("end") or ("settled" if terminal else "timed-out")
    matched = w.get("matched")
    if matched is not None:
        matched = _record(line=line_record(matched["line"]), before=[line_record(x) for x in matched["before"]])
    return _record(job=snapshot_record(job), end=end, matched=matched, prompt=w.get("prompt"))


class Guest:
    """The component, linked to `backend`. `wasm` is the component's path or bytes."""

    def __init__(self, wasm: str | PathLike[str] | bytes | bytearray, backend: Backend | None) -> None:
        self.backend = backend
        self.engine = wasmtime.Engine()
        if isinstance(wasm, (bytes, bytearray)):
            self.component = wc.Component(self.engine, bytes(wasm))
        else:
            self.component = wc.Component.from_file(self.engine, str(wasm))
        self._callers: dict[int, str | None] = {}
        self._reps = itertools.count(1)
        self.linker = wc.Linker(self.engine)
        self._link()

    # -- imports ------------------------------------------------------------

    def _caller(self, store: Any, this: Any) -> str | None:
        # Taking the host side of a borrowed handle also ends the borrow.
        return self._callers[this.to_host(store).rep]

    def _link(self) -> None:
        # The backend is looked up on every call, so it can be swapped.
        class Current:
            def __getattr__(_, name: str) -> Any:
                return getattr(self.backend, name)

        b: Any = Current()

        def guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
            def call(store: Any, this: Any, *args: Any) -> Any:
                caller = self._caller(store, this)
                try:
                    return fn(caller, *args)
                except RegistryError as e:
                    return error_variant(e)

            return call

        def get(caller: str | None, job_id: str) -> Record:
            return snapshot_record(b.get(caller, job_id))

        def read(caller: str | None, job_id: str) -> Record:
            text, job = b.read(caller, job_id)
            return _record(text=text, job=snapshot_record(job))

        def kill(caller: str | None, job_id: str, reason: str | None) -> Any:
            return b.kill(caller, job_id, reason)

        def output(caller: str | None, job_id: str, window: Record) -> Record:
            w = _plain(window)
            out = b.output(caller, job_id, w)
            return _record(
                head=out["head"],
                tail=out["tail"],
                omitted_bytes=int(out["omitted_bytes"]),
                job=snapshot_record(out["job"]),
            )

        def optional(name: str, extension: str) -> Callable[..., Any]:
            method: Callable[..., Any] | None = getattr(self.backend, name, None)
            if method is None:
                raise RegistryError("unsupported", extension)
            return method

        def write_input(caller: str | None, job_id: str, data: str, close: bool) -> int:
            return int(optional("write_input", "input")(caller, job_id, data, close))

        def signal(caller: str | None, job_id: str, name: str) -> None:
            optional("signal", "input")(caller, job_id, name)
            return None

        def lines(caller: str | None, job_id: str, query: Any) -> Record:
            page = optional("lines", "log")(caller, job_id, _plain(query))
            return _record(
                lines=[line_record(x) for x in page["lines"]],
                hits=[int(h) for h in page["hits"]],
                total_matches=int(page["total_matches"]),
                extents=[
                    _record(
                        stream=e["stream"],
                        total_bytes=int(e["total_bytes"]),
                        dropped_bytes=int(e["dropped_bytes"]),
                        first_line=int(e["first_line"]),
                        last_line=int(e["last_line"]),
                    )
                    for e in page["extents"]
                ],
                stopped=None
                if page.get("stopped") is None
                else _record(stream=page["stopped"]["stream"], line=int(page["stopped"]["line"])),
                job=snapshot_record(page["job"]),
            )

        def ports(caller: str | None, job_id: str) -> list[Record]:
            return [
                _record(address=p["address"], port=int(p["port"])) for p in optional("ports", "ports")(caller, job_id)
            ]

        def resize(caller: str | None, job_id: str, size: Any) -> None:
            optional("resize", "terminal")(caller, job_id, _plain(size))
            return None

        def screen(caller: str | None, job_id: str) -> Record:
            view = optional("screen", "terminal")(caller, job_id)
            return _record(
                size=_record(rows=int(view["size"]["rows"]), cols=int(view["size"]["cols"])),
                lines=list(view["lines"]),
                cursor_row=int(view["cursor_row"]),
                cursor_col=int(view["cursor_col"]),
                alternate=bool(view["alternate"]),
                job=snapshot_record(view["job"]),
            )

        def list_jobs(store: Any, this: Any) -> list[Record]:
            caller = self._caller(store, this)
            return [snapshot_record(j) for j in b.list_jobs(caller)]

        def diag(store: Any, level: str, message: str) -> None:
            getattr(log, {"warn": "warning"}.get(level, level), log.info)("%s", message)

        with self.linker.root() as root:
            with root.add_instance(f"{PACKAGE}/registry@{VERSION}") as reg:
                reg.add_resource("owner-scope", ResourceType.host(SCOPE_TYPE), lambda store, rep: None)
                reg.add_func("[method]owner-scope.list-jobs", list_jobs)
                reg.add_func("[method]owner-scope.get", guarded(get))
                reg.add_func("[method]owner-scope.read", guarded(read))
                reg.add_func("[method]owner-scope.kill", guarded(kill))
                reg.add_func("[method]owner-scope.output", guarded(output))
                reg.add_func("[method]owner-scope.write-input", guarded(write_input))
                reg.add_func("[method]owner-scope.signal", guarded(signal))
                reg.add_func("[method]owner-scope.lines", guarded(lines))
                reg.add_func("[method]owner-scope.ports", guarded(ports))
                reg.add_func("[method]owner-scope.resize", guarded(resize))
                reg.add_func("[method]owner-scope.screen", guarded(screen))
            with root.add_instance(f"{PACKAGE}/clock@{VERSION}") as clock:
                clock.add_func("now-ms", lambda store: int(b.now_ms()))
            with root.add_instance(f"{PACKAGE}/diag@{VERSION}") as d:
                d.add_func("log", diag)

    # -- calls --------------------------------------------------------------

    def _call(self, interface: str, name: str, *args: Any, caller: str | None = None, scoped: bool = False) -> Any:
        store = wasmtime.Store(self.engine)
        instance = self.linker.instantiate(store, self.component)
        iface = instance.get_export_index(store, f"{PACKAGE}/{interface}@{VERSION}")
        # A component without the export fails in wasmtime-py, as a component should not.
        func: Any = instance.get_func(store, instance.get_export_index(store, name, iface))  # type: ignore[arg-type]
        rep = None
        if scoped:
            rep = next(self._reps)
            self._callers[rep] = caller
            args = (ResourceHost.own(rep, SCOPE_TYPE),) + args
        try:
            result = func(store, *args)
            func.post_return(store)
            return result
        except wasmtime.WasmtimeError as e:
            raise GuestError(str(e)) from e
        finally:
            if rep is not None:
                self._callers.pop(rep, None)

    def configure(self, config_json: str) -> GuestConfig:
        """The validated config (a WIT record, passed back to every call), or
        raise ValueError with the plugin's message."""
        out = self._call("tools", "configure", config_json)
        if isinstance(out, str):
            raise ValueError(out)
        return cast(GuestConfig, out)

    def tool_definitions(self, config: GuestConfig) -> list[ToolDefinition]:
        return [_definition(d) for d in self._call("tools", "tool-definitions", config)]

    def start_tool(self, config: GuestConfig) -> ToolDefinition:
        """The start tool (`bash`) in the config's words."""
        return _definition(self._call("tools", "start-tool", config))

    def check_start(self, config: GuestConfig, args_json: str, max_command_bytes: int) -> tuple[str, Any]:
        """Checks the start tool's arguments: ``("ok", request)``, a WIT
        ``start-request`` record to pass to `started`, or ``("err", result)``,
        the exact result for the model. A command longer than
        `max_command_bytes` is refused before the guest copies it."""
        out = self._call("tools", "check-start", config, args_json, max_command_bytes)
        if out.tag == "err":
            return "err", _result(out.payload)
        return "ok", out.payload

    def started(self, config: GuestConfig, request: Any, made: Variant) -> Step:
        """The start tool's result for `request`, given what the start did:
        ``Variant("ok", Variant("new", id))``, ``Variant("ok", Variant("existing", id))``
        or ``Variant("err", Variant(case, payload))`` with a WIT ``start-error`` case
        (``no-controller``, ``stale-owner``, ``limit-reached``, ``refused``).
        ``("done", result)``, or for a start that yields (extension ``yield``)
        ``("wait", request)``: wait, then `invoke_step` with ``"bash"`` words it."""
        out = self._call("tools", "started", config, request, made)
        if out.tag == "done":
            return "done", _result(out.payload)
        return "wait", cast(WaitRequest, _plain(out.payload))

    def describe_call(self, config: GuestConfig, tool: str, args_json: str) -> UiCard | None:
        return cast("UiCard | None", _plain(self._call("tools", "describe-call", config, tool, args_json)))

    def system_prompt(self, config: GuestConfig) -> PromptSection | None:
        return cast("PromptSection | None", _plain(self._call("tools", "system-prompt", config)))

    def invoke_step(
        self,
        caller: str | None,
        config: GuestConfig,
        tool: str,
        args_json: str,
        waited: JobSnapshot | WaitOutcome | RegistryError | None = None,
    ) -> Step:
        """One step of a call: ``("done", result)`` or ``("wait", request)``.
        `waited` is absent on the first step, then a job dict, a dict with
        ``job``, ``end`` and ``matched``, or a RegistryError."""
        if waited is None:
            out = self._call("tools", "invoke", config, tool, args_json, caller=caller, scoped=True)
        else:
            outcome = error_variant(waited) if isinstance(waited, RegistryError) else waited_record(waited)
            out = self._call("tools", "resume", config, tool, args_json, outcome, caller=caller, scoped=True)
        if out.tag == "done":
            return "done", _result(out.payload)
        if out.tag == "wait":
            return "wait", cast(WaitRequest, _plain(out.payload))
        raise GuestError(f"unexpected call outcome {out.tag}")

    def finalize(
        self, caller: str | None, config: GuestConfig, tool: str, args_json: str, blocks: list[ContentBlock]
    ) -> list[ContentBlock]:
        lowered = [Variant("text", b["text"]) if "text" in b else Variant("other", b["other"]) for b in blocks]
        out = self._call("tools", "finalize", config, tool, args_json, lowered, caller=caller, scoped=True)
        return [{v.tag: v.payload} for v in out]

    def completion_notice(self, config: GuestConfig, job: JobSnapshot) -> Notice:
        return cast(Notice, _plain(self._call("notices", "completion-notice", config, snapshot_record(job))))

    def deliver(self, config: GuestConfig, job: JobSnapshot, owner_state: OwnerState | None) -> Delivery | None:
        owner = (
            None
            if owner_state is None
            else _record(status=owner_state["status"], wakes_spent=int(owner_state["wakes_spent"]))
        )
        return cast("Delivery | None", _plain(self._call("notices", "deliver", config, snapshot_record(job), owner)))

    def batch_notice(self, caller: str | None, config: GuestConfig, jobs: list[JobSnapshot]) -> Notice | None:
        jobs_in = [snapshot_record(j) for j in jobs]
        out = self._call("notices", "batch-notice", config, jobs_in, caller=caller, scoped=True)
        return cast("Notice | None", _plain(out))


def config_plain(config: GuestConfig) -> dict[str, Any]:
    """A configured record as a dict (snake case), for display and comparison."""
    plain = cast(dict[str, Any], _plain(config))
    plain["sandbox"] = sandbox_plain(config.sandbox)
    # A mount with no runners says nothing of them (as before there were any).
    if not plain.get("runners"):
        plain.pop("runners", None)
    return plain
