"""Background jobs for LLM agent harnesses, from Python.

The tool-jobs WebAssembly component (WIT ``harness:jobs@0.9.0``) holds every
model-facing behaviour; this package hosts it with wasmtime-py over a registry
of real child processes. An installed wheel carries the component.

    from harness_jobs import Plugin, Registry, bundled_component
    registry = Registry()
    plugin = Plugin(bundled_component(), registry, '{"profile":"a"}', on_notice=print)
    job = registry.start_shell("make test", owner="session-1")
    print(plugin.invoke("session-1", "job_output", {"job_id": job, "wait": True})["text"])
"""

from .component import bundled_component
from .guest import Guest, GuestError, RegistryError
from .plugin import Plugin
from .registry import Registry
from .types import (
    Backend,
    Delivery,
    ExcerptWindow,
    GuestConfig,
    JobSnapshot,
    JobStatus,
    Lane,
    Notice,
    OutputExcerpt,
    RegistryErrorKind,
    ToolAnnotations,
    ToolDefinition,
    ToolResult,
    WaitOutcome,
    WaitRequest,
)

__all__ = [
    "Backend",
    "Delivery",
    "ExcerptWindow",
    "Guest",
    "GuestConfig",
    "GuestError",
    "JobSnapshot",
    "JobStatus",
    "Lane",
    "Notice",
    "OutputExcerpt",
    "Plugin",
    "Registry",
    "RegistryError",
    "RegistryErrorKind",
    "ToolAnnotations",
    "ToolDefinition",
    "ToolResult",
    "WaitOutcome",
    "WaitRequest",
    "bundled_component",
]
