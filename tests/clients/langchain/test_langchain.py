"""`jobs-host mcp` under LangChain's MCP adapters (`langchain-mcp-adapters`) and a
LangGraph agent (`create_react_agent`), with a scripted chat model.

The adapters' documented basic use, `MultiServerMCPClient.get_tools()`, opens a new
server process for every tool call: a job dies with the call that started it, and
the next call reads that its id is unknown. The book's snippet shows both fixes, and
the tests run each: a persistent session (`client.session(...)` with
`load_mcp_tools`), and `mcp --session KEY`, whose per-call processes all attach to
one durable session held by the user's daemon (its runtime and state directories
here are the test's own, and the daemon is stopped after).

Runs in its own virtualenv (target/langchain-venv): the adapters need an `mcp`
older than the one tests/clients/python pins.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import unittest
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
from langchain_core.outputs import ChatGeneration, ChatResult
from langchain_core.tools import BaseTool
from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_mcp_adapters.tools import load_mcp_tools
from langgraph.prebuilt import create_react_agent
from pydantic import Field

# create_react_agent is LangGraph's own agent; LangGraph 1 points to
# langchain.agents.create_agent, a package this test does not need.
warnings.filterwarnings("ignore", message="create_react_agent has been moved")

ROOT = Path(__file__).resolve().parents[3]
JOBS_HOST_BIN = os.environ.get("JOBS_HOST_BIN") or str(ROOT / "target" / "debug" / "jobs-host")
TEST_BOUND_S = 120.0
# One compiled component for every server of these tests (a fresh HOME each).
CACHE = ["--cache-dir", str(ROOT / "target" / "clients-cache")]
TOOL_NAMES = ["bash", "job_output", "job_list", "job_kill"]
STARTED = "started background job bash-1"
READ = "built\n[status: completed, exit code: 0]"


class ScriptedChatModel(BaseChatModel):
    """A chat model that answers from a script: each turn is a function of the
    tool results so far, returning the next message (tool calls or the final
    text). `bind_tools` keeps it as it is; the names it was offered are kept."""

    script: Callable[[list[ToolMessage]], AIMessage]
    offered: list[list[str]] = Field(default_factory=list)

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools: Sequence[Any], **kwargs: Any) -> ScriptedChatModel:
        self.offered.append([tool.name for tool in tools])
        return self

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        results = [m for m in messages if isinstance(m, ToolMessage)]
        return ChatResult(generations=[ChatGeneration(message=self.script(results))])


def call(name: str, args: dict[str, Any], call_id: str) -> AIMessage:
    return AIMessage(content="", tool_calls=[{"name": name, "args": args, "id": call_id, "type": "tool_call"}])


def start_then_read(results: list[ToolMessage]) -> AIMessage:
    """Starts a short build, then reads it with a wait, then stops."""
    if not results:
        return call("bash", {"command": "sleep 0.2; echo built"}, "start")
    if len(results) == 1:
        return call("job_output", {"job_id": "bash-1", "wait": True, "timeout_ms": 30000}, "read")
    return AIMessage(content="done")


def text_of(message: ToolMessage) -> str:
    """A tool result as the model reads it: the adapters give a text block's text."""
    content = message.content
    if isinstance(content, str):
        return content
    return "".join(block["text"] if isinstance(block, dict) else str(block) for block in content)


class LangChainTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.state = tempfile.TemporaryDirectory()
        root = Path(self.state.name)
        for name in ("run", "state", "home"):
            (root / name).mkdir(mode=0o700)
        self.env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(root / "home"),
            "XDG_RUNTIME_DIR": str(root / "run"),
            "XDG_STATE_HOME": str(root / "state"),
        }

        # The durable test's daemon, on every way out (nothing to stop elsewhere),
        # then the directories.
        self.addCleanup(self.state.cleanup)
        self.addCleanup(
            subprocess.run,
            [JOBS_HOST_BIN, "daemon", "--stop"],
            check=False,
            env=self.env,
            capture_output=True,
            timeout=60,
        )

    def client(self, *flags: str) -> MultiServerMCPClient:
        # The snippet of docs/src/harness-setup.md, with this repository's binary.
        return MultiServerMCPClient(
            {"jobs": {"command": JOBS_HOST_BIN, "args": [*CACHE, "mcp", *flags], "transport": "stdio", "env": self.env}}
        )

    async def run_agent(self, tools: list[BaseTool]) -> list[str]:
        """Runs the scripted agent over `tools`; what each tool call gave the model."""
        model = ScriptedChatModel(script=start_then_read)
        agent = create_react_agent(model, tools)
        with anyio.fail_after(TEST_BOUND_S):
            state = await agent.ainvoke({"messages": [("user", "Build it and read the result.")]})
        self.assertEqual(model.offered, [TOOL_NAMES])
        self.assertEqual(state["messages"][-1].content, "done")
        return [text_of(m) for m in state["messages"] if isinstance(m, ToolMessage)]

    async def test_the_basic_use_loses_each_job_with_its_call(self) -> None:
        """What the fixes are for: a process per call, so the job started by the
        first call is gone, and the read's answer says its id is unknown."""
        results = await self.run_agent(await self.client().get_tools())
        self.assertEqual(results[0], STARTED)
        self.assertEqual(results[1], "Error: unknown job bash-1")

    async def test_a_persistent_session_keeps_its_jobs(self) -> None:
        client = self.client()
        async with client.session("jobs") as session:
            results = await self.run_agent(await load_mcp_tools(session))
        self.assertEqual(results, [STARTED, READ])

    async def test_a_durable_session_keeps_its_jobs_across_per_call_processes(self) -> None:
        results = await self.run_agent(await self.client("--session", "langgraph").get_tools())
        self.assertEqual(results, [STARTED, READ])


if __name__ == "__main__":
    unittest.main()
