"""`jobs-host mcp` under the OpenAI Agents SDK (`openai-agents`): its own
`MCPServerStdio` client and agent loop, with the SDK's `ScriptedModel` as the model.

The SDK gives every MCP call `client_session_timeout_seconds`, 5 by default: a
wait longer than that fails, and the model reads only the SDK's generic words.
The book's snippet sets it above the host's 110 s cap on waits; the first test
runs that snippet's setting through a 30 s wait, the second shows what the
default does to an 8 s one.
"""

from __future__ import annotations

import unittest
from typing import Any

import anyio
from agents import Agent, Runner, set_tracing_disabled
from agents.mcp import MCPServerStdio
from agents.testing import ScriptedModel, assistant_message, function_call
from test_clients import JOBS_HOST_BIN, TEST_BOUND_S, TOOL_NAMES, server_env, started

# No trace export: there is no OpenAI account behind the scripted model.
set_tracing_disabled(True)

# The SDK's words for a tool call that failed (agents.tool.default_tool_error_function).
SDK_ERROR = "An error occurred while running the tool. Please try again."


def tool_outputs(model: ScriptedModel) -> list[Any]:
    """What the model was given for each of its tool calls, in order: the
    `function_call_output` items of the last request it received."""
    last = model.calls[-1].input
    assert isinstance(last, list), last
    return [item["output"] for item in last if isinstance(item, dict) and item.get("type") == "function_call_output"]


def text(value: str) -> list[dict[str, str]]:
    """One MCP text block as the SDK hands it to a Responses-API model."""
    return [{"type": "input_text", "text": value}]


class OpenAiAgentsTest(unittest.IsolatedAsyncioTestCase):
    async def run_agent(self, model: ScriptedModel, timeout_s: float | None) -> str:
        # The snippet of docs/src/harness-setup.md, with this repository's binary.
        kwargs: dict[str, Any] = {} if timeout_s is None else {"client_session_timeout_seconds": timeout_s}
        server = MCPServerStdio(
            name="jobs",
            params={"command": JOBS_HOST_BIN, "args": ["mcp"], "env": server_env()},
            **kwargs,
        )
        with anyio.fail_after(TEST_BOUND_S):
            async with server:
                agent = Agent(name="worker", model=model, mcp_servers=[server])
                result = await Runner.run(agent, "Start the job and wait for it.")
        self.assertEqual([tool.name for tool in model.calls[0].tools], TOOL_NAMES)
        model.assert_complete()
        return str(result.final_output)

    async def test_a_30_s_wait_is_answered_with_the_snippets_timeout(self) -> None:
        model = ScriptedModel(
            [
                [function_call("bash", {"command": "sleep 300"}, call_id="start")],
                [function_call("job_output", {"job_id": "bash-1", "wait": True, "timeout_ms": 30000}, call_id="wait")],
                [assistant_message("still running")],
            ]
        )
        self.assertEqual(await self.run_agent(model, 120), "still running")
        # The wait ran its 30 s and answered as the contract words it.
        self.assertEqual(
            tool_outputs(model),
            [text(started("bash-1")), text("(no new output)\n[status: running]")],
        )

    async def test_the_sdks_default_timeout_fails_a_longer_wait(self) -> None:
        model = ScriptedModel(
            [
                [function_call("bash", {"command": "sleep 300"}, call_id="start")],
                [function_call("job_output", {"job_id": "bash-1", "wait": True, "timeout_ms": 8000}, call_id="wait")],
                [assistant_message("gave up")],
            ]
        )
        self.assertEqual(await self.run_agent(model, None), "gave up")
        self.assertEqual(tool_outputs(model), [text(started("bash-1")), SDK_ERROR])


if __name__ == "__main__":
    unittest.main()
