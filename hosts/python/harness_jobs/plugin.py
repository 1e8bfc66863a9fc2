"""The plugin as a harness uses it: tools, calls (with waits run here, in the
host) and completion notices, over a `Registry` of real processes."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from os import PathLike
from typing import Any, cast

from wasmtime.component import Variant

from .guest import Guest, RegistryError
from .registry import Registry
from .types import AgentStatus, JobSnapshot, Lane, Notice, OwnerState, PromptSection, ToolDefinition, ToolResult

MAX_COMMAND_BYTES = 65536
"""The longest command started, as the Rust host's default: one argument of
execve may not be longer than 128 KiB anyway."""

NoticeHandler = Callable[["str | None", Lane, Notice], None]
"""Receives ``(owner, lane, notice)`` for each notice a pushing profile delivers."""


class Plugin:
    """One loaded copy of the tool-jobs plugin over `registry`.

    `on_notice(owner, lane, notice)` receives each completion notice a pushing
    profile (A or B) decides to deliver; `lane` is ``"inject"`` or
    ``"followup"`` (wake an idle owner). `owner_status(owner)` tells whether an
    owner is ``"idle"`` or ``"running"`` (default: running).
    """

    def __init__(
        self,
        wasm: str | PathLike[str] | bytes | bytearray,
        registry: Registry,
        config_json: str = "{}",
        on_notice: NoticeHandler | None = None,
        owner_status: Callable[[str], AgentStatus] | None = None,
    ) -> None:
        self.registry = registry
        self.guest = Guest(wasm, registry)
        self.config = self.guest.configure(config_json)
        # This reference host runs the seed surfaces only; the extensions need a
        # registry with input, retained lines and ports (the Rust host has them).
        if self.config.extensions:
            raise ValueError(
                "this host does not support extensions (asked for: " + ", ".join(self.config.extensions) + ")"
            )
        self.profile = self.config.profile
        self.on_notice: NoticeHandler = on_notice or (lambda owner, lane, notice: None)
        self.owner_status: Callable[[str], AgentStatus] = owner_status or (lambda owner: "running")
        self._wakes: dict[str | None, int] = {}
        self._pulled: dict[str, list[JobSnapshot]] = {}
        self._lock = threading.Lock()
        self._start_name: str | None = None
        registry.on_job_done(self._on_done)

    def tool_definitions(self) -> list[ToolDefinition]:
        """The guest's start tool (`bash`) followed by its job tools, each a dict
        with name, description, input_schema, output_schema and annotations."""
        return [self.guest.start_tool(self.config), *self.guest.tool_definitions(self.config)]

    def system_prompt(self) -> PromptSection | None:
        return self.guest.system_prompt(self.config)

    def invoke(
        self, caller: str | None, tool: str, args: dict[str, Any] | str, cancel: threading.Event | None = None
    ) -> ToolResult:
        """Runs one tool call for `caller` (an owner id, or None) and returns
        ``{"text", "is_error", "value"}``. A call that waits does so here, on the
        registry; `cancel` (a threading.Event) ends such a wait."""
        args_json = args if isinstance(args, str) else json.dumps(args)
        if self._start_name is None:
            self._start_name = self.guest.start_tool(self.config)["name"]
        if tool == self._start_name:
            return self._start(caller, args_json)
        step = self.guest.invoke_step(caller, self.config, tool, args_json)
        for _ in range(8):
            if step[0] == "done":
                return step[1]
            request = step[1]
            waited: JobSnapshot | RegistryError
            try:
                waited = self.registry.wait(caller, request["job_id"], request["timeout_ms"], cancel)
            except RegistryError as e:
                waited = e
            step = self.guest.invoke_step(caller, self.config, tool, args_json, waited)
        if step[0] == "done":
            return step[1]
        return {"text": "Error: plugin failed: the guest asked to wait too many times", "is_error": True, "value": None}

    def _start(self, caller: str | None, args_json: str) -> ToolResult:
        """The start tool: the guest checks the arguments and words the answer;
        the registry starts ``bash -c`` for the owner."""
        kind, checked = self.guest.check_start(self.config, args_json, MAX_COMMAND_BYTES)
        if kind == "err":
            return cast(ToolResult, checked)
        request = checked
        workdir = request.workdir
        if workdir is not None and not os.path.isdir(workdir):
            why = (
                f"{workdir} is not a directory" if os.path.exists(workdir) else f"{workdir}: No such file or directory"
            )
            made = Variant("err", Variant("refused", f"invalid workdir: {why}"))
        else:
            job_id = self.registry.start_shell(request.command, owner=caller, workdir=workdir)
            made = Variant("ok", Variant("new", job_id))
        kind, answer = self.guest.started(self.config, request, made)
        if kind != "done":
            # This host offers no extensions, so no start yields.
            return {"text": "Error: plugin failed: an unexpected wait", "is_error": True, "value": None}
        return cast(ToolResult, answer)

    def person_wrote(self, owner: str) -> None:
        """A person wrote to `owner`: its wake budget is full again."""
        with self._lock:
            self._wakes.pop(owner, None)

    def pull_notice(self, owner: str) -> Notice | None:
        """Profile C: the one update for `owner`'s next step, or None."""
        with self._lock:
            jobs = self._pulled.pop(owner, [])
        if not jobs:
            return None
        return self.guest.batch_notice(owner, self.config, jobs)

    def _on_done(self, snapshot: JobSnapshot, owner: str | None) -> None:
        if self.profile == "c":
            if owner is not None:
                with self._lock:
                    self._pulled.setdefault(owner, []).append(snapshot)
            return
        current = self.registry.inspect(snapshot["id"])
        if current is None:
            return
        state: OwnerState | None = None
        if owner is not None:
            with self._lock:
                spent = self._wakes.get(owner, 0)
            state = {"status": self.owner_status(owner), "wakes_spent": spent}
        decision = self.guest.deliver(self.config, current, state)
        if decision is None or not self.registry.claim_notice(snapshot["id"]):
            return
        if decision["lane"] == "followup":
            with self._lock:
                self._wakes[owner] = self._wakes.get(owner, 0) + 1
        self.on_notice(owner, decision["lane"], decision["notice"])
