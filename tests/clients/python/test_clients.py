"""`jobs-host mcp` driven through real MCP clients, asserting on what a model is given.

Two clients, each talking to a fresh `jobs-host mcp` process over stdio:

- the official Python SDK (`mcp.ClientSession` over `mcp.client.stdio.stdio_client`);
- pydantic-ai, an agent framework, with a scripted `FunctionModel` and the server as an
  `MCPToolset` (pydantic-ai 2 removed `MCPServerStdio`; `MCPToolset` over a FastMCP
  `StdioTransport` is its replacement).

Timing is made deterministic without sleeps: a job that must still be running is held
behind a FIFO gate, and "has finished" is learnt from the server's own announcement, the
`notifications/message` it sends for every completion notice (a notice is queued for the
next tool result before it is announced, so once it is announced the next result carries
it). Every wait is bounded so a broken server fails a test instead of hanging it.

A job that finishes before the model has read it is announced, and its notice is placed
before the next result even when that next result is the read itself. The tests therefore
never read a quick job before it has been announced: "start, then read at once" would race
the job's exit (the read then carries the job's own notice or not, by timing).

The server binary comes from JOBS_HOST_BIN (default: target/debug/jobs-host of this repo).
"""

from __future__ import annotations

import asyncio
import atexit
import errno
import json
import os
import shlex
import shutil
import tempfile
import unittest
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, AsyncIterator

import anyio
import mcp.types as types
from mcp import ClientSession, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client
from fastmcp.client.transports import StdioTransport
from pydantic_ai import Agent
from pydantic_ai.mcp import MCPToolset
from pydantic_ai.messages import ModelMessage, ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
from pydantic_ai.models.function import AgentInfo, FunctionModel
from pydantic_ai.usage import UsageLimits

ROOT = Path(__file__).resolve().parents[3]
JOBS_HOST_BIN = os.environ.get("JOBS_HOST_BIN") or str(ROOT / "target" / "debug" / "jobs-host")

# Upper bound for anything that waits (a call, a notice, a gate); never asserted on.
BOUND_S = 60.0
# The whole of one test, as a last resort against a hang.
TEST_BOUND_S = 180.0

TOOL_NAMES = ["bash", "job_output", "job_list", "job_kill"]
COMPLETED = "[status: completed, exit code: 0]"
NO_NEW_OUTPUT = f"(no new output)\n{COMPLETED}"


def started(job_id: str) -> str:
    return f"started background job {job_id}"


def notice(job_id: str, command: str, status: str = COMPLETED) -> str:
    """The completion notice for a bash job, as the model reads it."""
    return f"background job {job_id} (bash: {command}) finished {status}. Read its output with job_output."


# The servers' runtime directory, the tests' own: each plain `jobs-host mcp`
# puts its view socket (for `jobs-host top`) there, not in the user's.
RUNTIME_DIR = tempfile.mkdtemp(prefix="jobs-host-clients-")
atexit.register(shutil.rmtree, RUNTIME_DIR, True)


def server_env() -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/"),
        "XDG_RUNTIME_DIR": RUNTIME_DIR,
    }


class Notices:
    """The completion notices the server announced as `notifications/message`, in arrival order."""

    def __init__(self) -> None:
        self.params: list[types.LoggingMessageNotificationParams] = []
        self._changed = anyio.Event()

    async def callback(self, params: types.LoggingMessageNotificationParams) -> None:
        self.params.append(params)
        self._changed.set()
        self._changed = anyio.Event()

    def texts(self) -> list[str]:
        return [p.data["text"] for p in self.params]

    async def wait_for(self, job_id: str, timeout: float = BOUND_S) -> types.LoggingMessageNotificationParams:
        """The announcement of `job_id`'s completion notice, waiting for it (bounded)."""
        prefix = f"background job {job_id} "
        with anyio.fail_after(timeout):
            while True:
                for p in self.params:
                    if isinstance(p.data, dict) and str(p.data.get("text", "")).startswith(prefix):
                        return p
                await self._changed.wait()


class RecordingWriteStream:
    """The client's write stream, recording every JSON-RPC message the SDK sends."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.sent: list[Any] = []

    async def send(self, item: Any, /) -> None:
        self.sent.append(item.message)
        await self.inner.send(item)

    async def aclose(self) -> None:
        await self.inner.aclose()

    async def __aenter__(self) -> "RecordingWriteStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.inner.aclose()

    def requests(self, method: str) -> list[types.JSONRPCRequest]:
        return [m for m in self.sent if isinstance(m, types.JSONRPCRequest) and m.method == method]

    def notifications(self, method: str) -> list[types.JSONRPCNotification]:
        return [m for m in self.sent if isinstance(m, types.JSONRPCNotification) and m.method == method]


@dataclass
class Connection:
    session: ClientSession
    notices: Notices
    wire: RecordingWriteStream

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result = await self.session.call_tool(name, arguments, read_timeout_seconds=BOUND_S)
        assert isinstance(result, types.CallToolResult), result
        return result


@asynccontextmanager
async def connect(*flags: str, env: dict[str, str] | None = None) -> AsyncIterator[Connection]:
    """A fresh `jobs-host mcp` (with `flags`, and `env` added to its environment) and an
    initialized SDK session; closing it ends the server's jobs."""
    notices = Notices()
    params = StdioServerParameters(command=JOBS_HOST_BIN, args=["mcp", *flags], env={**server_env(), **(env or {})})
    try:
        async with stdio_client(params) as (read, write):
            wire = RecordingWriteStream(write)
            async with ClientSession(read, wire, logging_callback=notices.callback) as session:
                with anyio.fail_after(BOUND_S):
                    await session.initialize()
                yield Connection(session, notices, wire)
    except BaseExceptionGroup as group:
        # The SDK's task groups wrap what the test raised (a failed assertion): unwrap a
        # lone exception so unittest reports it as it is.
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if isinstance(leaf, BaseExceptionGroup):
            raise
        raise leaf from None


def texts(test: unittest.TestCase, result: types.CallToolResult) -> list[str]:
    """The result's content blocks, each of which must be text, and that it is a plain success."""
    test.assertFalse(result.is_error, result)
    test.assertIsNone(result.structured_content, "the model must be given the text, not a structured value")
    for block in result.content:
        test.assertIsInstance(block, types.TextContent, result)
    return [block.text for block in result.content]


async def open_gate(path: str) -> None:
    """Let a job blocked on `read line < path` go on (bounded; waits for its reader to open)."""
    with anyio.fail_after(BOUND_S):
        while True:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as e:
                if e.errno != errno.ENXIO:  # no reader yet
                    raise
                await anyio.sleep(0.01)
                continue
            try:
                os.write(fd, b"go\n")
            finally:
                os.close(fd)
            return


class ClientTestCase(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        # The test loop runs in debug mode; building an agent or a pydantic model may take
        # longer than its 0.1 s slow-callback report on a busy machine, which is noise here.
        asyncio.get_running_loop().slow_callback_duration = 10.0


class SdkClientTest(ClientTestCase):
    """The official Python SDK's `ClientSession`."""

    def assert_announced(self, params: types.LoggingMessageNotificationParams, text: str) -> None:
        self.assertEqual(params.level, "notice")
        self.assertEqual(params.logger, "tool-jobs")
        self.assertIsInstance(params.data, dict)
        self.assertEqual(set(params.data), {"lane", "text", "summary", "source"})
        self.assertEqual(params.data["lane"], "inject")
        self.assertEqual(params.data["text"], text)

    async def test_tools_list(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with connect() as conn:
                tools = (await conn.session.list_tools()).tools
                self.assertEqual([t.name for t in tools], TOOL_NAMES)
                for tool in tools:
                    self.assertIsNone(tool.output_schema, tool.name)
                    self.assertNotIn("outputSchema", tool.model_dump(by_alias=True, exclude_none=True), tool.name)
                annotations = {t.name: t.annotations for t in tools}
                self.assertIs(annotations["job_output"].read_only_hint, True)
                self.assertIs(annotations["job_list"].read_only_hint, True)
                self.assertIs(annotations["job_kill"].destructive_hint, True)
                self.assertIs(annotations["bash"].open_world_hint, True)

    async def test_exact_texts_and_notice_before_later_result(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with connect() as conn:
                # b. The start text, and a wait read of the job.
                # A job this short may end before its start's own result, which then
                # carries its notice first; otherwise the next result does.
                result = await conn.call("bash", {"command": "echo hi"})
                *early, text = texts(self, result)
                self.assertEqual(text, started("bash-1"))
                self.assertIn(early, ([], [notice("bash-1", "echo hi")]))
                # It finishes unread, so it is announced; its notice then comes with the
                # read (the next result), before the read's own text.
                self.assert_announced(await conn.notices.wait_for("bash-1"), notice("bash-1", "echo hi"))
                result = await conn.call("job_output", {"job_id": "bash-1", "wait": True})
                later = [] if early else [notice("bash-1", "echo hi")]
                self.assertEqual(texts(self, result), later + [f"hi\n{COMPLETED}"])
                result = await conn.call("job_output", {"job_id": "bash-1"})
                self.assertEqual(texts(self, result), [NO_NEW_OUTPUT])

                # c. A job nobody reads: its notice is placed before a later result, once.
                result = await conn.call("bash", {"command": "echo built"})
                *early, text = texts(self, result)
                self.assertEqual(text, started("bash-2"))
                self.assertIn(early, ([], [notice("bash-2", "echo built")]))
                self.assert_announced(await conn.notices.wait_for("bash-2"), notice("bash-2", "echo built"))
                listing = "bash-1 [bash] completed \u2014 echo hi\nbash-2 [bash] completed \u2014 echo built"
                result = await conn.call("job_list", {})
                later = [] if early else [notice("bash-2", "echo built")]
                self.assertEqual(texts(self, result), later + [listing])
                result = await conn.call("job_list", {})
                self.assertEqual(texts(self, result), [listing])

                # Each job was announced exactly once.
                self.assertEqual(conn.notices.texts(), [notice("bash-1", "echo hi"), notice("bash-2", "echo built")])

    async def test_a_terminal_job_is_read_as_a_person_sees_it(self) -> None:
        # The terminal extension through the SDK: a REPL's prompt ends the wait and is
        # named, what is typed comes back rendered, and no escape sequence reaches the
        # model (the REPL colours nothing here, the shell's prompt does).
        with anyio.fail_after(TEST_BOUND_S):
            async with connect("--extensions", "all") as conn:
                command = "printf '\\033[1;32mready\\033[0m\\n'; exec python3 -q"
                result = await conn.call("bash", {"command": command, "tty": True})
                self.assertEqual(texts(self, result), [started("bash-1")])
                wait = {"job_id": "bash-1", "wait": True, "timeout_ms": 60000}
                result = await conn.call("job_output", wait)
                self.assertEqual(
                    texts(self, result),
                    ["[wait ended: the job is waiting for input: >>>]\nready\n>>> \n[status: running]"],
                )
                result = await conn.call("job_input", {"job_id": "bash-1", "text": "6*7"})
                self.assertEqual(texts(self, result), ["wrote 4 bytes to job bash-1\n[status: running]"])
                result = await conn.call("job_output", wait)
                self.assertEqual(
                    texts(self, result),
                    ["[wait ended: the job is waiting for input: >>>]\n6*7\n42\n>>> \n[status: running]"],
                )
                result = await conn.call("job_output", {"job_id": "bash-1", "view": "screen"})
                self.assertEqual(
                    texts(self, result),
                    [
                        "[screen: 30 rows \u00d7 120 columns, cursor at row 4, column 5]\n"
                        "ready\n>>> 6*7\n42\n>>>\n[status: running]"
                    ],
                )
                result = await conn.call("job_input", {"job_id": "bash-1", "keys": ["ctrl-d"]})
                # The REPL may end before this result is made (its notice then
                # comes first here), between the two calls (before the next
                # result), or during the wait that reads its end (no notice
                # then): at most once.
                *early, text = texts(self, result)
                self.assertEqual(text.split("\n")[0], "wrote 1 byte to job bash-1")
                self.assertIn(early, ([], [notice("bash-1", command)]))
                result = await conn.call("job_output", wait)
                *later, text = texts(self, result)
                self.assertEqual(text, f"\n{COMPLETED}")
                self.assertIn(early + later, ([], [notice("bash-1", command)]))

    async def test_cancelled_wait_loses_nothing(self) -> None:
        with anyio.fail_after(TEST_BOUND_S), tempfile.TemporaryDirectory() as tmp:
            gate = os.path.join(tmp, "gate")
            os.mkfifo(gate)
            command = f"read line < {shlex.quote(gate)}; echo done"
            async with connect() as conn:
                result = await conn.call("bash", {"command": command})
                self.assertEqual(texts(self, result), [started("bash-1")])

                # The job is held at the gate, so the 20 s wait cannot end before the
                # client gives up after 1 s and cancels the request.
                arguments = {"job_id": "bash-1", "wait": True, "timeout_ms": 20000}
                with self.assertRaises(MCPError) as raised:
                    await conn.session.call_tool("job_output", arguments, read_timeout_seconds=1.0)
                self.assertEqual(raised.exception.code, types.REQUEST_TIMEOUT)

                # The SDK told the server: one notifications/cancelled naming that request.
                [request] = [m for m in conn.wire.requests("tools/call") if m.params["name"] == "job_output"]
                [cancelled] = conn.wire.notifications("notifications/cancelled")
                self.assertEqual(cancelled.params["requestId"], request.id)
                # The server reads its input in order: once a later ping is answered, the
                # cancellation has been applied, before the job can end.
                with anyio.fail_after(BOUND_S):
                    await conn.session.send_ping()
                self.assertEqual(conn.notices.texts(), [])

                await open_gate(gate)
                self.assert_announced(await conn.notices.wait_for("bash-1"), notice("bash-1", command))
                # Nothing was consumed by the abandoned wait: the whole output, after the notice.
                result = await conn.call("job_output", {"job_id": "bash-1"})
                self.assertEqual(texts(self, result), [notice("bash-1", command), f"done\n{COMPLETED}"])
                result = await conn.call("job_output", {"job_id": "bash-1"})
                self.assertEqual(texts(self, result), [NO_NEW_OUTPUT])
                self.assertEqual(conn.notices.texts(), [notice("bash-1", command)])


class PydanticAiTest(ClientTestCase):
    """pydantic-ai's agent loop with a scripted model: what each tool return gives the model.

    pydantic-ai maps an MCP result's content blocks one by one (a text block becomes its
    string, JSON-parsed only when it starts with `[` or `{`) and gives the model the single
    value when there is one block and the list of values when there are several
    (`pydantic_ai.mcp._map_mcp_tool_results`); a structuredContent, had there been one,
    would replace all of that. A provider then sends a non-string return as its compact
    JSON text (`ToolReturnPart.model_response_str`).
    """

    async def test_agent_episode(self) -> None:
        """pydantic-ai negotiates revision 2026-07-28 (no handshake), where a server
        may log only for a request that opted in: its client (fastmcp) opts every
        request in at `debug`, so a notice that arrives while a call is in flight
        is also logged, once. Either way each one reaches the model, once, as the
        first block of the next tool result. The scripted model polls `job_list`
        (which consumes nothing) to see its jobs end."""
        late = "sleep 0.3; echo late"
        notices = Notices()
        received: list[ToolReturnPart] = []  # every tool return the model was given, in order
        offered: list[list[str]] = []  # the tool names the model was offered, per turn

        def call(name: str, args: dict[str, Any]) -> ModelResponse:
            return ModelResponse(parts=[ToolCallPart(name, args)])

        async def poll() -> ModelResponse:
            # A pause between polls keeps their number modest; how many it
            # takes never matters (the run has no request limit, only the
            # test's time bound).
            await asyncio.sleep(0.01)
            return call("job_list", {})

        def carried(job_id: str) -> bool:
            """Whether a result so far began with `job_id`'s notice."""
            prefix = f"background job {job_id} "
            return any(isinstance(p.content, list) and str(p.content[0]).startswith(prefix) for p in received)

        async def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
            offered.append([t.name for t in info.function_tools])
            received.extend(p for p in messages[-1].parts if isinstance(p, ToolReturnPart))
            names = [p.tool_name for p in received]
            if not received:
                return call("bash", {"command": "echo step1"})
            # The list consumes nothing: polled until a result has brought bash-1's
            # notice, then the late job, then until its notice, then the read.
            if names.count("bash") == 1:
                return call("bash", {"command": late}) if carried("bash-1") else await poll()
            if "job_output" not in names:
                if carried("bash-2"):
                    return call("job_output", {"job_id": "bash-1", "wait": True})
                return await poll()
            return ModelResponse(parts=[TextPart("done")])

        transport = StdioTransport(command=JOBS_HOST_BIN, args=["mcp"], env=server_env(), keep_alive=False)
        # No prefix: the toolset is used as is, so the model sees the server's tool names.
        toolset = MCPToolset(transport, log_handler=notices.callback, init_timeout=BOUND_S, read_timeout=BOUND_S)
        agent = Agent(FunctionModel(model), toolsets=[toolset])
        with anyio.fail_after(TEST_BOUND_S):
            async with agent:
                # Polls until each job has ended: as many requests as that
                # takes (pydantic-ai's default stops a run at 50).
                run = await agent.run(
                    "Run the two jobs and read them.", usage_limits=UsageLimits(request_limit=None)
                )

        self.assertEqual(run.output, "done")
        self.assertTrue(all(names == TOOL_NAMES for names in offered), offered)
        # What the model received is what the history keeps.
        history = [
            p for m in run.all_messages() if isinstance(m, ModelRequest) for p in m.parts if isinstance(p, ToolReturnPart)
        ]
        self.assertEqual([(p.tool_name, p.content) for p in history], [(p.tool_name, p.content) for p in received])

        contents = [p.content for p in received]
        # One text block: the plain string (not a {"kind": "background", ...} object).
        self.assertEqual(contents[0], started("bash-1"))
        # Each notice exactly once, as the first of two blocks (a list of two strings),
        # in the first result after its job ended unread.
        notice_1, notice_2 = notice("bash-1", "echo step1"), notice("bash-2", late)
        carrying = {
            text: [i for i, c in enumerate(contents) if isinstance(c, list) and c[0] == text]
            for text in (notice_1, notice_2)
        }
        self.assertEqual([len(v) for v in carrying.values()], [1, 1], contents)
        first = carrying[notice_1][0]
        self.assertTrue(all(isinstance(c, str) for c in contents[:first]), contents)
        self.assertEqual(len(contents[first]), 2)
        self.assertEqual(
            received[first].model_response_str(), json.dumps(contents[first], ensure_ascii=False, separators=(",", ":"))
        )
        # The late start comes after bash-1's notice; the read of bash-1 is the last result,
        # whole, and its job's notice was spent already.
        starts = [i for i, p in enumerate(received) if p.tool_name == "bash"]
        self.assertEqual(len(starts), 2)
        self.assertGreater(starts[1], first)
        self.assertGreater(carrying[notice_2][0], starts[1])
        self.assertEqual(received[-1].tool_name, "job_output")
        self.assertEqual(contents[-1], f"step1\n{COMPLETED}")
        # What was logged (only while a call that opted in was in flight) is
        # among the notices, each at most once.
        logged = notices.texts()
        self.assertTrue(set(logged) <= {notice_1, notice_2}, logged)
        self.assertEqual(len(logged), len(set(logged)), logged)

if __name__ == "__main__":
    unittest.main()
