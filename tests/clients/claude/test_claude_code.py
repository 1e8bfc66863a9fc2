"""`jobs-host mcp` under Claude Code itself (2.1.332, pinned in package.json), with a
scripted model behind a local Messages API.

Claude Code defers MCP tools behind its ToolSearch: the model is shown only the
tools' names and the server's instructions until it loads their schemas. The test
plays the model as one would: it reads what the first request shows (names, no
schemas, the instructions saying what each tool does), loads the two tools it needs
through ToolSearch, starts a job and reads it, and checks each tool result Claude
Code hands back is the contract's text.

The Messages API here is a stdlib HTTP server in the test process: it answers every
request of the main conversation with the script's next step (streamed as the API
streams), and anything else Claude Code asks with plain text.
"""

from __future__ import annotations

import http.server
import json
import os
import re
import subprocess
import tempfile
import threading
import unittest
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
JOBS_HOST_BIN = os.environ.get("JOBS_HOST_BIN") or str(ROOT / "target" / "debug" / "jobs-host")
CLAUDE = HERE / "node_modules" / ".bin" / "claude"
BOUND_S = 120
TOOLS = ["mcp__jobs__bash", "mcp__jobs__job_output", "mcp__jobs__job_list", "mcp__jobs__job_kill"]


def sse(events: list[dict[str, Any]]) -> bytes:
    return b"".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n".encode() for e in events)


def reply(model: str, block: dict[str, Any], stop: str) -> bytes:
    """One assistant message of one content block, as the streaming API sends it."""
    start = dict(block)
    delta: dict[str, Any]
    if block["type"] == "text":
        start["text"] = ""
        delta = {"type": "text_delta", "text": block["text"]}
    else:
        start["input"] = {}
        delta = {"type": "input_json_delta", "partial_json": json.dumps(block["input"])}
    usage = {"input_tokens": 10, "output_tokens": 1}
    message = {"id": "msg_test", "type": "message", "role": "assistant", "model": model, "content": []}
    return sse(
        [
            {"type": "message_start", "message": {**message, "stop_reason": None, "usage": usage}},
            {"type": "content_block_start", "index": 0, "content_block": start},
            {"type": "content_block_delta", "index": 0, "delta": delta},
            {"type": "content_block_stop", "index": 0},
            {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
            {"type": "message_stop"},
        ]
    )


def tool_use(name: str, args: dict[str, Any], n: int) -> dict[str, Any]:
    return {"type": "tool_use", "id": f"toolu_{n:02d}", "name": name, "input": args}


def flat(content: Any) -> str:
    """A message's or a tool result's content as text."""
    if isinstance(content, str):
        return content
    return "".join(flat(b.get("content", b.get("text", ""))) if isinstance(b, dict) else str(b) for b in content)


class Model:
    """The scripted model: the main conversation's requests, in order, and its steps."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.lock = threading.Lock()
        # The job waits for this file, made once the model has the start's
        # result: its end (and so its notice) cannot come before that result.
        self.scratch = tempfile.TemporaryDirectory()
        self.gate = os.path.join(self.scratch.name, "gate")

    def step(self, request: dict[str, Any]) -> dict[str, Any]:
        with self.lock:
            self.requests.append(request)
            turn = len(self.requests)
        if turn == 1:
            return tool_use("ToolSearch", {"query": "select:mcp__jobs__bash,mcp__jobs__job_output"}, turn)
        if turn == 2:
            command = f"while [ ! -e {self.gate} ]; do sleep 0.01; done; echo from-claude-code"
            return tool_use("mcp__jobs__bash", {"command": command}, turn)
        if turn == 3:
            open(self.gate, "w").close()
            return tool_use("mcp__jobs__job_output", {"job_id": "bash-1", "wait": True}, turn)
        return {"type": "text", "text": "done"}


def serve(model: Model) -> http.server.ThreadingHTTPServer:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("content-length", 0))) or b"{}")
            if self.path.startswith("/v1/messages/count_tokens"):
                self.answer_json({"input_tokens": 10})
                return
            names = [t.get("name") for t in body.get("tools", [])]
            # The main conversation offers ToolSearch; anything else (a title,
            # a summary) gets plain text.
            block = model.step(body) if "ToolSearch" in names else {"type": "text", "text": "ok"}
            stop = "tool_use" if block["type"] == "tool_use" else "end_turn"
            if body.get("stream"):
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.end_headers()
                self.wfile.write(reply(body.get("model", "m"), block, stop))
            else:
                usage = {"input_tokens": 10, "output_tokens": 1}
                self.answer_json(
                    {
                        "id": "msg_test",
                        "type": "message",
                        "role": "assistant",
                        "model": body.get("model"),
                        "content": [block],
                        "stop_reason": stop,
                        "stop_sequence": None,
                        "usage": usage,
                    }
                )

        def answer_json(self, value: Any) -> None:
            out = json.dumps(value).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


class ClaudeCodeTest(unittest.TestCase):
    def test_tools_loaded_through_tool_search_as_a_model_would(self) -> None:
        self.assertTrue(CLAUDE.exists(), f"no {CLAUDE}: tests/clients/run installs Claude Code")
        model = Model()
        server = serve(model)
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        home = tempfile.TemporaryDirectory()
        self.addCleanup(home.cleanup)
        config = Path(home.name) / "mcp.json"
        # The component compiled once for these tests (the HOME here is fresh),
        # and the view socket in the test's own runtime directory.
        jobs = {
            "command": JOBS_HOST_BIN,
            "args": ["--cache-dir", str(ROOT / "target" / "clients-cache"), "mcp"],
            "env": {"XDG_RUNTIME_DIR": home.name},
        }
        config.write_text(json.dumps({"mcpServers": {"jobs": jobs}}))
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": home.name,
            "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{server.server_address[1]}",
            "ANTHROPIC_API_KEY": "sk-test",
            "DISABLE_TELEMETRY": "1",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            # Deferred tools, as Claude Code chooses for a first-party API
            # (a local base URL does not imply it).
            "ENABLE_TOOL_SEARCH": "true",
        }
        done = subprocess.run(
            [
                str(CLAUDE),
                "-p",
                "Build it in the background and read the result.",
                "--mcp-config",
                str(config),
                "--strict-mcp-config",
                "--allowedTools",
                "ToolSearch,mcp__jobs__bash,mcp__jobs__job_output",
            ],
            cwd=home.name,
            env=env,
            capture_output=True,
            text=True,
            timeout=BOUND_S,
            check=False,
        )
        self.assertEqual(done.returncode, 0, done)
        self.assertEqual(done.stdout.strip(), "done")
        self.assertEqual(len(model.requests), 4, [flat(r.get("messages", [])[-1:]) for r in model.requests])

        # Before any schema is loaded: the names only, and the instructions
        # that say what each tool does.
        first = model.requests[0]
        offered = [t["name"] for t in first["tools"]]
        self.assertFalse(set(TOOLS) & set(offered), offered)
        shown = json.dumps(first)
        listed = re.search(r"deferred tools are now available via ToolSearch.*?:\\n(.*?)\\n\\n", shown)
        self.assertIsNotNone(listed, "no list of deferred tools")
        assert listed is not None
        deferred = listed.group(1).split("\\n")
        self.assertTrue(set(TOOLS) <= set(deferred), deferred)
        for line in [
            "## jobs",
            "What each tool does:",
            "- bash: Run a shell command in the background and return a job id immediately",
            "- job_output: Read a background job.",
            "- job_kill: Request cancellation of a running background job by job id.",
        ]:
            self.assertIn(json.dumps(line)[1:-1], shown)

        # ToolSearch answered with references to the two tools, and from then
        # on their schemas (ours, whole) are among the request's tools.
        search = self.tool_result(model.requests[1], "toolu_01")
        self.assertEqual(
            search,
            [
                {"type": "tool_reference", "tool_name": "mcp__jobs__bash"},
                {"type": "tool_reference", "tool_name": "mcp__jobs__job_output"},
            ],
        )
        loaded = {t["name"]: t for t in model.requests[1]["tools"] if t["name"].startswith("mcp__jobs__")}
        self.assertEqual(sorted(loaded), ["mcp__jobs__bash", "mcp__jobs__job_output"])
        self.assertIn("command", loaded["mcp__jobs__bash"]["input_schema"]["properties"])
        self.assertTrue(loaded["mcp__jobs__bash"]["description"].startswith("Run a shell command in the background"))
        # What the model was handed for each call: the contract's text.
        self.assertEqual(
            self.tool_result(model.requests[2], "toolu_02"),
            [{"type": "text", "text": "started background job bash-1"}],
        )
        read = flat(self.tool_result(model.requests[3], "toolu_03"))
        self.assertTrue(read.endswith("from-claude-code\n[status: completed, exit code: 0]"), read)

    def tool_result(self, request: dict[str, Any], call: str) -> Any:
        """The content of the result of tool call `call`, as the request hands it
        to the model (Claude Code may merge several results into one message)."""
        blocks = [
            b
            for m in request["messages"]
            if isinstance(m.get("content"), list)
            for b in m["content"]
            if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("tool_use_id") == call
        ]
        self.assertEqual(len(blocks), 1, request["messages"][-1])
        return blocks[0]["content"]


if __name__ == "__main__":
    unittest.main()
