"""A user's typed code against the installed harness_jobs (tests/packages/run
checks it with mypy --strict, then runs it): the component the wheel carries,
a job started through the guest's start tool, and its output read back."""

from pathlib import Path

from harness_jobs import JobSnapshot, Plugin, Registry, ToolResult, bundled_component

component: Path = bundled_component()
registry = Registry()
plugin = Plugin(component, registry, '{"profile":"a"}')
names: list[str] = [tool["name"] for tool in plugin.tool_definitions()]
assert names[0] == "bash", names
started: ToolResult = plugin.invoke("me", "bash", {"command": "echo typed"})
value = started["value"]
assert isinstance(value, dict), started
job_id = str(value["jobId"])
read: ToolResult = plugin.invoke("me", "job_output", {"job_id": job_id, "wait": True})
assert "typed" in read["text"], read
jobs: list[JobSnapshot] = registry.list_jobs("me")
assert [job["id"] for job in jobs] == [job_id], jobs
print(f"{component.name}: {read['text'].splitlines()[0]}")
registry.close()
