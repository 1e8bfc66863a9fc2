"""The shapes that cross the package's API, as typed dicts.

They are plain ``dict`` objects at run time (a snapshot still reads as
``job["status"]`` and compares and serialises as before); the types say which
keys each one has. Field names are the WIT's in snake case, except the MCP
tool annotations, which are spelled as MCP spells them.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, TypedDict

JobStatus = Literal["running", "stopping", "completed", "killed", "failed"]
KillOutcome = Literal["requested", "already-finished"]
OutputStream = Literal["stdout", "stderr", "raw", "raw-stderr"]
JobSignal = Literal["int", "term", "hup", "kill", "stop", "cont"]
WaitEnd = Literal["settled", "timed-out", "matched", "quiet", "prompt"]
Lane = Literal["inject", "followup"]
AgentStatus = Literal["idle", "running"]
RegistryErrorKind = Literal[
    "unknown-job",
    "foreign-job",
    "wait-aborted",
    "producer-failed",
    "invalid-pattern",
    "no-input",
    "input-closed",
    "unsupported",
    "no-terminal",
]


class JobSnapshot(TypedDict):
    """A job as a registry shows it (the WIT ``job-snapshot``); times are ms
    since the epoch."""

    id: str
    kind: str
    label: str
    status: JobStatus
    detail: str | None
    started_at: int
    finished_at: int | None
    output_limit_bytes: int | None
    reported: bool


class ExcerptWindow(TypedDict):
    """The whole output if it has at most ``whole_up_to`` bytes, else its first
    ``head_bytes`` and last ``tail_bytes``."""

    whole_up_to: int
    head_bytes: int
    tail_bytes: int


class OutputExcerpt(TypedDict):
    head: str
    tail: str
    omitted_bytes: int
    job: JobSnapshot


class OutputLine(TypedDict):
    """One line of retained output (the ``log`` extension)."""

    stream: OutputStream
    number: int
    text: str


class LineMatch(TypedDict):
    line: OutputLine
    before: list[OutputLine]


class _WaitOutcomeJob(TypedDict):
    job: JobSnapshot


class WaitOutcome(_WaitOutcomeJob, total=False):
    """A wait's outcome with its end said; ``matched`` only for a ready wait
    that saw its pattern."""

    end: WaitEnd | None
    matched: LineMatch | None
    prompt: str | None


class StreamExtent(TypedDict):
    stream: OutputStream
    total_bytes: int
    dropped_bytes: int
    first_line: int
    last_line: int


class SearchStop(TypedDict):
    stream: OutputStream
    line: int


class _LinePageFields(TypedDict):
    lines: list[OutputLine]
    hits: list[int]
    total_matches: int
    extents: list[StreamExtent]
    job: JobSnapshot


class LinePage(_LinePageFields, total=False):
    stopped: SearchStop | None


class ListeningPort(TypedDict):
    address: str
    port: int


class ToolAnnotations(TypedDict):
    """MCP tool annotations: a title and the behaviour hints."""

    title: str
    readOnlyHint: bool
    destructiveHint: bool
    idempotentHint: bool
    openWorldHint: bool


class ToolDefinition(TypedDict):
    """A tool as MCP lists it, its schemas parsed."""

    name: str
    description: str
    input_schema: dict[str, Any]
    output_schema: dict[str, Any] | None
    annotations: ToolAnnotations


class ToolResult(TypedDict):
    """A tool call's result: ``value`` is the parsed structured result, or None."""

    text: str
    is_error: bool
    value: Any


class WaitUntil(TypedDict):
    pattern: str | None
    quiet_ms: int | None
    prompt_quiet_ms: int | None


class WaitRequest(TypedDict):
    """What the guest asks the host to wait for before it resumes the call."""

    job_id: str
    timeout_ms: int
    until: WaitUntil | None


class UiCard(TypedDict):
    title: str
    kind: str
    raw_input: str | None


class PromptSection(TypedDict):
    name: str
    order: int
    text: str


class Notice(TypedDict):
    text: str
    summary: str | None
    plugin: str
    form: str | None


class Delivery(TypedDict):
    lane: Lane
    notice: Notice


ContentBlock = dict[str, str]
"""A content block of a tool result: ``{"text": ...}`` or ``{"other": ...}``."""


class OwnerState(TypedDict):
    status: AgentStatus
    wakes_spent: int


Profile = Literal["a", "b", "c"]


class GuestConfig(Protocol):
    """The validated config, a WIT record as wasmtime-py lifts it: pass it back
    to every call. Its other fields are the WIT's, in kebab case
    (``getattr(config, "wait-timeout-ms")``); ``config_plain`` gives them all as
    a dict."""

    profile: Profile
    extensions: list[str]
    sandbox: Any
    """The session's sandbox (a WIT ``sandbox`` record), or ``None``."""


class Backend(Protocol):
    """What the guest may ask of a registry, for one caller at a time; a method
    that fails as the contract expects raises RegistryError. The opt-in
    extensions' methods (``write_input``, ``signal``, ``lines``, ``ports``) are
    looked up when called: a backend without one answers ``unsupported``."""

    def list_jobs(self, caller: str | None) -> list[JobSnapshot]: ...

    def get(self, caller: str | None, job_id: str) -> JobSnapshot: ...

    def read(self, caller: str | None, job_id: str) -> tuple[str, JobSnapshot]: ...

    def kill(self, caller: str | None, job_id: str, reason: str | None) -> KillOutcome: ...

    def output(self, caller: str | None, job_id: str, window: ExcerptWindow) -> OutputExcerpt: ...

    def now_ms(self) -> int: ...
