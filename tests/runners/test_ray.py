"""Jobs on a real Ray head through `jobs-host mcp --runner ray=...` and the MCP Python SDK.

`tests/runners/run` starts the head and sets JOBS_HOST_RAY to its dashboard's address
(JOBS_HOST_RAY_TOKEN too when the head asks for a token). The head runs on this machine,
so a job there can be held behind a FIFO gate here and its processes looked for here.

- `LocalSemantics` and `RaySemantics` are one suite (`Semantics`) run over this host's
  shell and over the Ray runner: read once, incremental reads, exit codes, caps, notices
  exactly once, kill, wait, list and ready waits. A remote job's reads carry one more line,
  its placement (`[ray: jobshost-...]`); the suite takes it out and compares the rest
  with the same expected text for both.
- `RayOnly`: what only an engine has: raw bytes through Ray's text log, a TERM-ignoring
  job gone after the grace, a log tail dropped mid-stream (through a proxy that cuts every
  connection), a stop from outside, a queue that never runs the job, an engine that is
  down, and what a remote job cannot have.
- `Durable`: remote jobs of a durable session: a daemon killed while a job runs and writes,
  the next client taking it on with every byte once; a job the engine forgot while no
  daemon ran; a session without the runner leaving the job for one with it; `ps`,
  `logs -f`, `kill` and `wait` on remote jobs.
- `HeadRestart` (run last on its head): the head stopped and started again mid-job.
- `TokenHead`: the same start against a head that asks for a token, and a wrong token.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import sys
import tempfile
import time
import unittest
import urllib.request
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "clients" / "python"))
from test_clients import BOUND_S, TEST_BOUND_S, connect, notice, open_gate, started  # noqa: E402

RAY = os.environ.get("JOBS_HOST_RAY", "")
TOKEN = os.environ.get("JOBS_HOST_RAY_TOKEN")
ONLY_TOKEN = os.environ.get("JOBS_HOST_RAY_ONLY_TOKEN") == "1"
PLACEMENT = re.compile(r"^\[ray: jobshost-[0-9a-f]{6}-bash-\d+[^\]\n]*\]$", re.M)
GRACE_MS = 1000


def flags(address: str = "") -> list[str]:
    return [
        "--runner",
        f"ray={address or RAY}",
        "--extensions",
        "ready,limits,input",
        "--kill-grace-ms",
        str(GRACE_MS),
    ]


def without_placement(text: str) -> str:
    return PLACEMENT.sub("", text).replace("\n\n[status", "\n[status")


def texts(result: Any) -> list[str]:
    return [block.text for block in result.content]


def ray_get(path: str) -> Any:
    request = urllib.request.Request(RAY + path)
    if TOKEN:
        request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=BOUND_S) as answer:
        return json.loads(answer.read())


def ray_post(path: str) -> Any:
    request = urllib.request.Request(RAY + path, data=b"{}", method="POST")
    request.add_header("Content-Type", "application/json")
    if TOKEN:
        request.add_header("Authorization", f"Bearer {TOKEN}")
    with urllib.request.urlopen(request, timeout=BOUND_S) as answer:
        return json.loads(answer.read())


def submission_id(row_or_read: str) -> str:
    found = re.search(r"jobshost-[0-9a-f]{6}-bash-\d+", row_or_read)
    assert found, row_or_read
    return found.group(0)


@unittest.skipIf(not RAY or ONLY_TOKEN, "JOBS_HOST_RAY is not set (tests/runners/run starts a Ray head)")
class Semantics(unittest.IsolatedAsyncioTestCase):
    """The job semantics a model relies on; `where` is the start's runner argument."""

    where: dict[str, Any] = {}

    async def asyncSetUp(self) -> None:
        if type(self) is Semantics:
            self.skipTest("the shared suite runs as LocalSemantics and RaySemantics")
        asyncio.get_running_loop().slow_callback_duration = 10.0
        self.tmp = tempfile.TemporaryDirectory()

    async def asyncTearDown(self) -> None:
        self.tmp.cleanup()

    def gate(self) -> str:
        path = os.path.join(self.tmp.name, f"gate-{time.monotonic_ns()}")
        os.mkfifo(path)
        return path

    async def start(self, conn: Any, command: str, **more: Any) -> str:
        result = await conn.call("bash", {"command": command, **self.where, **more})
        self.assertFalse(result.is_error, result)
        self.assertEqual(len(texts(result)), 1, result)
        text = texts(result)[0]
        self.assertRegex(text, r"^started background job bash-\d+$")
        return text.removeprefix("started background job ")

    async def read(self, conn: Any, job: str, **more: Any) -> str:
        result = await conn.call("job_output", {"job_id": job, **more})
        self.assertFalse(result.is_error, result)
        # A notice for this job may come first, in its own block.
        return self.unplaced(texts(result)[-1])

    def flags(self) -> list[str]:
        """The server's flags: the runner's, and the extensions the tests use."""
        return flags()

    def connect(self, *more: str) -> Any:
        """A fresh server with the runner's flags and `more`."""
        return connect(*self.flags(), *more)

    def unplaced(self, text: str) -> str:
        """A read without its placement line."""
        return without_placement(text)

    async def test_read_once_then_nothing_new(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "printf 'one\\ntwo\\n'")
                announced = await conn.notices.wait_for(job)
                self.assertEqual(announced.data["text"], notice(job, "printf 'one\\ntwo\\n'"))
                self.assertEqual(await self.read(conn, job), "one\ntwo\n[status: completed, exit code: 0]")
                self.assertEqual(await self.read(conn, job), "(no new output)\n[status: completed, exit code: 0]")
                # Exactly one notice, whatever comes after.
                await conn.call("job_list", {})
                self.assertEqual(sum(t.startswith(f"background job {job} ") for t in conn.notices.texts()), 1)

    async def test_incremental_reads_and_a_wait(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                gate = self.gate()
                job = await self.start(conn, f"echo first; read line < {gate}; echo second; exit 7")
                first = await self.read(conn, job, until="^first$", timeout_ms=BOUND_S * 1000)
                self.assertEqual(first, "[wait ended: stdout line 1 matched]\n1:first\nfirst\n[status: running]")
                await open_gate(gate)
                rest = await self.read(conn, job, wait=True, timeout_ms=BOUND_S * 1000)
                # The notice may come with the read or not at all (the read told the
                # end); the read is the same either way.
                self.assertEqual(rest, "second\n[status: completed, exit code: 7]")

    async def test_kill_and_list(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "echo up; sleep 600")
                up = await self.read(conn, job, until="^up$", timeout_ms=BOUND_S * 1000)
                self.assertEqual(up, "[wait ended: stdout line 1 matched]\n1:up\nup\n[status: running]")
                rows = texts(await conn.call("job_list", {}))[-1]
                self.assertRegex(rows, rf"^{job} \[bash\] running \u2014 echo up; sleep 600")
                killed = texts(await conn.call("job_kill", {"job_id": job}))[-1]
                self.assertEqual(killed, f"requested cancellation of job {job}")
                end = await self.read(conn, job, wait=True, timeout_ms=BOUND_S * 1000)
                self.assertRegex(end, r"^\(no new output\)\n\[status: killed[,\]]")
                # No notice for a job its owner killed.
                await conn.call("job_list", {})
                self.assertEqual([t for t in conn.notices.texts() if f" {job} " in t], [])

    async def test_output_limit_stops_the_job(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "while :; do echo yyyyyyyyy; done", max_output_bytes=1000)
                await conn.notices.wait_for(job)
                end = await self.read(conn, job)
                self.assertIn("[status: killed, output limit reached (1000 bytes)", end)
                output = end[: end.index("\n[status:")]
                self.assertTrue(output.startswith("yyyyyyyyy\n"), output[:100])
                if self.where:
                    # A remote job's output is taken up to the limit exactly (this
                    # host's shell stops a job on the read that passes it).
                    # The read gives one trailing newline to its status line.
                    self.assertIn(len(output.encode()), (999, 1000))

    async def test_a_time_limit_stops_the_job(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "sleep 600", timeout_ms=3000)
                announced = await conn.notices.wait_for(job)
                self.assertIn("[status: killed, time limit reached (3000 ms)", announced.data["text"])

    async def test_a_big_output_is_capped_as_any(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "seq 1 100000")
                await conn.notices.wait_for(job)
                end = await self.read(conn, job)
                self.assertIn("\n99999\n100000\n[some output was dropped from memory; full output: ", end)
                self.assertTrue(end.endswith("]\n[status: completed, exit code: 0]"), end[-300:])


class LocalSemantics(Semantics):
    where = {}


class RaySemantics(Semantics):
    where = {"runner": "ray"}


@unittest.skipIf(not RAY or ONLY_TOKEN, "JOBS_HOST_RAY is not set (tests/runners/run starts a Ray head)")
class RayOnly(Semantics):
    where = {"runner": "ray"}

    # The shared tests are not run twice.
    test_read_once_then_nothing_new = None  # type: ignore[assignment]
    test_incremental_reads_and_a_wait = None  # type: ignore[assignment]
    test_kill_and_list = None  # type: ignore[assignment]
    test_output_limit_stops_the_job = None  # type: ignore[assignment]
    test_a_time_limit_stops_the_job = None  # type: ignore[assignment]
    test_a_big_output_is_capped_as_any = None  # type: ignore[assignment]

    def test_check_runner_says_the_head_is_usable(self) -> None:
        import subprocess

        done = subprocess.run(
            [os.environ["JOBS_HOST_BIN"], "check-runner", "ray", "--json", *flags()[:2]],
            capture_output=True,
            text=True,
            timeout=BOUND_S,
            check=False,
        )
        self.assertEqual(done.returncode, 0, done)
        found = json.loads(done.stdout)
        self.assertEqual((found["runner"], found["address"], found["usable"]), ("ray", RAY, True), found)
        self.assertTrue(found["engine"].startswith("Ray 2."), found)

    async def test_raw_bytes_through_the_engines_text_log(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with connect(*flags()) as conn:
                job = await self.start(conn, "printf 'a\\rb\\r\\nc\\377d\\n'; echo after")
                await conn.notices.wait_for(job)
                # Ray's text mode makes \r and \r\n a newline; a byte that is not
                # UTF-8 is U+FFFD and does not end the tail.
                self.assertEqual(
                    await self.read(conn, job), "a\nb\nc\ufffdd\nafter\n[status: completed, exit code: 0]"
                )

    async def test_a_term_ignoring_job_is_gone_after_the_grace(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with connect(*flags()) as conn:
                pids = os.path.join(self.tmp.name, "pids")
                job = await self.start(
                    conn, f"trap '' TERM; sleep 600 & echo $$ $! > {pids}; echo up; wait; wait; sleep 600"
                )
                await self.read(conn, job, until="^up$", timeout_ms=BOUND_S * 1000)
                alive = [int(p) for p in Path(pids).read_text().split()]
                self.assertTrue(all(os.path.exists(f"/proc/{p}") for p in alive))
                await conn.call("job_kill", {"job_id": job})
                end = await self.read(conn, job, wait=True, timeout_ms=BOUND_S * 1000)
                self.assertRegex(end, r"\[status: killed[,\]]")
                # Killed only once the engine says so, which is after the relay's
                # SIGKILL: nothing of the job is left.
                left = [p for p in alive if os.path.exists(f"/proc/{p}") and "Z" not in _state(p)]
                self.assertEqual(left, [])

    async def test_a_dropped_tail_loses_and_repeats_nothing(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            proxy = await CuttingProxy.start(RAY)
            try:
                async with connect(*flags(proxy.address)) as conn:
                    gate = self.gate()
                    command = (
                        f"for i in $(seq 1 30); do echo line-$i; sleep 0.05; done; read g < {gate}; "
                        "for i in $(seq 31 60); do echo line-$i; sleep 0.05; done"
                    )
                    job = await self.start(conn, command)
                    first = await self.read(conn, job, until="^line-30$", timeout_ms=BOUND_S * 1000)
                    proxy.cut()
                    await open_gate(gate)
                    await anyio.sleep(0.5)
                    proxy.cut()
                    await conn.notices.wait_for(job)
                    rest = await self.read(conn, job)
                    self.assertTrue(rest.endswith("\n[status: completed, exit code: 0]"), rest)
                    lines = (first + "\n" + rest).split("\n")
                    got = [line for line in lines if line.startswith("line-")]
                    self.assertEqual(got, [f"line-{i}" for i in range(1, 61)])
                    self.assertGreaterEqual(proxy.cuts, 1)
            finally:
                await proxy.close()

    async def test_a_stop_from_outside_is_failed_not_killed(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with connect(*flags()) as conn:
                job = await self.start(conn, "echo up; sleep 600")
                read = texts(await conn.call("job_output", {"job_id": job, "until": "^up$", "timeout_ms": BOUND_S * 1000}))[-1]
                ray_post(f"/api/jobs/{submission_id(read)}/stop")
                announced = await conn.notices.wait_for(job)
                self.assertIn("[status: failed, stopped outside jobs-host: runner ray reports ", announced.data["text"])

    async def test_a_job_the_cluster_cannot_place_waits_and_can_be_killed(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with connect(*flags()) as conn:
                job = await self.start(conn, "echo never", resources={"gpus": 1})
                waited = await self.read(conn, job, wait=True, timeout_ms=3000)
                self.assertEqual(waited, "(no new output)\n[status: running]")
                rows = texts(await conn.call("job_list", {}))[-1]
                self.assertRegex(rows, rf"{job} \[bash\] running \u2014 echo never \[ray: jobshost-[0-9a-f]{{6}}-{job} pending: ")
                await conn.call("job_kill", {"job_id": job})
                end = await self.read(conn, job, wait=True, timeout_ms=BOUND_S * 1000)
                self.assertEqual(end, "(no new output)\n[status: killed]")

    async def test_an_engine_that_is_down_makes_no_job(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            closed = f"http://127.0.0.1:{_closed_port()}"
            async with connect(*flags(closed)) as conn:
                result = await conn.call("bash", {"command": "echo hi", "runner": "ray"})
                self.assertTrue(result.is_error, result)
                self.assertIn(f"cannot reach the Ray engine at {closed}", texts(result)[0])
                self.assertEqual(texts(await conn.call("job_list", {}))[-1], "(no background jobs)")

    async def test_jobs_outlive_their_session_only_when_it_says_so(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            for outlive, expected in ((False, "STOPPED"), (True, "RUNNING")):
                extra = ["--runner-jobs", "outlive"] if outlive else []
                async with connect(*flags(), *extra) as conn:
                    job = await self.start(conn, "echo up; sleep 600")
                    read = texts(
                        await conn.call("job_output", {"job_id": job, "until": "^up$", "timeout_ms": BOUND_S * 1000})
                    )[-1]
                    sid = submission_id(read)
                # The session has ended: its job was stopped, or let go of.
                status = ray_get(f"/api/jobs/{sid}")["status"]
                while status != expected and status in ("RUNNING", "PENDING"):
                    await anyio.sleep(0.1)
                    status = ray_get(f"/api/jobs/{sid}")["status"]
                self.assertEqual(status, expected, (outlive, sid))
                if outlive:
                    await anyio.sleep(2)
                    self.assertEqual(ray_get(f"/api/jobs/{sid}")["status"], "RUNNING")
                    ray_post(f"/api/jobs/{sid}/stop")

    async def test_what_a_remote_job_cannot_have_is_refused(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with connect(*flags()) as conn:
                for extra in ({"stdin": True}, {"workdir": "/tmp"}, {"memory_bytes": 1 << 30}):
                    result = await conn.call("bash", {"command": "true", "runner": "ray", **extra})
                    self.assertTrue(result.is_error, (extra, result))
                    self.assertIn("runner", texts(result)[0])
                result = await conn.call("bash", {"command": "true", "runner": "slurm"})
                self.assertTrue(result.is_error, result)
                self.assertEqual(texts(await conn.call("job_list", {}))[-1], "(no background jobs)")


@unittest.skipIf(not RAY or ONLY_TOKEN, "JOBS_HOST_RAY is not set (tests/runners/run starts a Ray head)")
class Durable(unittest.IsolatedAsyncioTestCase):
    """Remote jobs of a durable session (`mcp --session`): a daemon killed while they run,
    the next client taking them on, and the person's view (`ps`, `logs`, `kill`, `wait`)."""

    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 10.0
        self.tmp = tempfile.TemporaryDirectory()
        os.chmod(self.tmp.name, 0o700)
        self.env = {"XDG_RUNTIME_DIR": self.tmp.name, "XDG_STATE_HOME": os.path.join(self.tmp.name, "state")}
        self.sids: list[str] = []

    async def asyncTearDown(self) -> None:
        self.cli("daemon", "--stop")
        for sid in self.sids:
            try:
                if ray_get(f"/api/jobs/{sid}")["status"] in ("RUNNING", "PENDING"):
                    ray_post(f"/api/jobs/{sid}/stop")
            except OSError:
                pass
        self.tmp.cleanup()

    def session(self, key: str = "k") -> Any:
        return connect(*flags(), "--session", key, env=self.env)

    def cli(self, *args: str) -> Any:
        import subprocess

        env = {**os.environ, **self.env}
        return subprocess.run(
            [os.environ["JOBS_HOST_BIN"], *args], env=env, capture_output=True, text=True, timeout=BOUND_S
        )

    def kill_daemon(self) -> None:
        pid = int(Path(self.tmp.name, "jobs-host", "daemon.lock").read_text().strip())
        os.kill(pid, 9)
        with anyio.fail_after(BOUND_S):
            while os.path.exists(f"/proc/{pid}") and "Z" not in _state(pid):
                time.sleep(0.01)

    async def start(self, conn: Any, command: str) -> tuple[str, str]:
        result = await conn.call("bash", {"command": command, "runner": "ray"})
        self.assertFalse(result.is_error, result)
        job = texts(result)[0].removeprefix("started background job ")
        rows = texts(await conn.call("job_list", {}))[-1]
        sid = submission_id(rows)
        self.sids.append(sid)
        return job, sid

    async def test_a_daemon_killed_mid_job_loses_and_repeats_nothing(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            gate = os.path.join(self.tmp.name, "gate")
            os.mkfifo(gate)
            command = (
                f"for i in $(seq 1 30); do echo line-$i; sleep 0.02; done; read g < {gate}; "
                "for i in $(seq 31 90); do echo line-$i; sleep 0.02; done; exit 5"
            )
            async with self.session() as conn:
                job, sid = await self.start(conn, command)
                first = texts(
                    await conn.call("job_output", {"job_id": job, "until": "^line-30$", "timeout_ms": BOUND_S * 1000})
                )[-1]
                self.assertIn(f"[ray: {sid}", first)
                # The daemon dies while the job runs on, and goes on writing.
                self.kill_daemon()
                await open_gate(gate)
            # The journal names the job's runner and engine id while no daemon runs.
            shown = self.cli("ps", "--journal", "--session", "k")
            self.assertIn(f"left on runner ray as {sid}", shown.stdout + shown.stderr)
            # And its output as the dead daemon took it, the engine's own lines left out.
            kept = self.cli("logs", "--session", "k", job)
            self.assertEqual(kept.returncode, 0, kept.stderr)
            taken = kept.stdout.splitlines()
            self.assertGreaterEqual(len(taken), 30, kept.stdout)
            self.assertEqual(taken, [f"line-{i}" for i in range(1, len(taken) + 1)])
            async with self.session() as conn:
                announced = await conn.notices.wait_for(job)
                self.assertEqual(announced.data["text"], notice(job, command, "[status: completed, exit code: 5]"))
                rest = without_placement(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertTrue(rest.endswith("\n[status: completed, exit code: 5]"), rest)
                lines = [line for line in (first + "\n" + rest).split("\n") if line.startswith("line-")]
                self.assertEqual(lines, [f"line-{i}" for i in range(1, 91)])
                again = without_placement(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertEqual(again, "(no new output)\n[status: completed, exit code: 5]")
                await conn.call("job_list", {})
                self.assertEqual(sum(t.startswith(f"background job {job} ") for t in conn.notices.texts()), 1)

    async def test_an_end_seen_before_the_kill_is_not_told_again(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.session() as conn:
                job, _ = await self.start(conn, "printf 'a\\nb\\n'; exit 2")
                await conn.notices.wait_for(job)
                # A reply records what the model was told before it goes out.
                await conn.call("job_list", {})
                self.kill_daemon()
            async with self.session() as conn:
                # Taken on as it ended, its output unread, its end told once.
                read = without_placement(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertEqual(read, "a\nb\n[status: completed, exit code: 2]")
                await conn.call("job_list", {})
                self.assertEqual(conn.notices.texts(), [])

    async def test_a_job_the_engine_forgot_is_lost_with_its_output_kept(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            gate = os.path.join(self.tmp.name, "gate")
            os.mkfifo(gate)
            async with self.session() as conn:
                job, sid = await self.start(conn, f"echo kept; read g < {gate}; echo gone")
                # Taken by the daemon, not read by the model (`logs` consumes nothing).
                while self.cli("logs", "--session", "k", job).stdout != "kept\n":
                    await anyio.sleep(0.1)
                self.kill_daemon()
                await open_gate(gate)
            # While no daemon runs, the job ends and the engine forgets it.
            while ray_get(f"/api/jobs/{sid}")["status"] in ("RUNNING", "PENDING"):
                await anyio.sleep(0.1)
            request = urllib.request.Request(RAY + f"/api/jobs/{sid}", method="DELETE")
            if TOKEN:
                request.add_header("Authorization", f"Bearer {TOKEN}")
            urllib.request.urlopen(request, timeout=BOUND_S).read()
            async with self.session() as conn:
                await conn.notices.wait_for(job)
                read = without_placement(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertEqual(read, f"kept\n[status: failed, lost: the engine has no record of {sid}]")

    async def test_a_session_without_the_runner_leaves_the_job_for_one_with_it(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            gate = os.path.join(self.tmp.name, "gate")
            os.mkfifo(gate)
            async with self.session() as conn:
                job, sid = await self.start(conn, f"echo one; read g < {gate}; echo two")
                await conn.call("job_output", {"job_id": job, "until": "^one$", "timeout_ms": BOUND_S * 1000})
                self.kill_daemon()
            async with connect("--session", "k", env=self.env) as conn:
                self.assertEqual(texts(await conn.call("job_list", {}))[-1], "(no background jobs)")
            self.assertEqual(self.cli("daemon", "--stop").returncode, 0)
            self.assertEqual(ray_get(f"/api/jobs/{sid}")["status"], "RUNNING")
            async with self.session() as conn:
                await open_gate(gate)
                await conn.notices.wait_for(job)
                read = without_placement(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertEqual(read, "two\n[status: completed, exit code: 0]")

    async def test_ps_logs_kill_and_wait_on_remote_jobs(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            gate = os.path.join(self.tmp.name, "gate")
            os.mkfifo(gate)
            async with self.session() as conn:
                ends, _ = await self.start(conn, f"echo one; read g < {gate}; echo two; exit 3")
                runs, runs_sid = await self.start(conn, "echo up; sleep 600")
                await conn.call("job_output", {"job_id": runs, "until": "^up$", "timeout_ms": BOUND_S * 1000})
                listed = self.cli("ps", "--session", "k")
                self.assertEqual(listed.returncode, 0, listed.stderr)
                self.assertIn(ends, listed.stdout)
                self.assertIn(runs, listed.stdout)
                logs = self.cli("logs", "--session", "k", runs)
                self.assertEqual((logs.returncode, logs.stdout), (0, "up\n"), logs.stderr)
                await open_gate(gate)
                followed = self.cli("logs", "-f", "--session", "k", ends)
                self.assertEqual(followed.stdout, "one\ntwo\n", followed.stderr)
                waited = self.cli("wait", "--session", "k", ends)
                self.assertEqual(waited.returncode, 3, waited.stdout + waited.stderr)
                killed = self.cli("kill", "--session", "k", runs)
                self.assertEqual(killed.returncode, 0, killed.stdout + killed.stderr)
                end = without_placement(
                    texts(await conn.call("job_output", {"job_id": runs, "wait": True, "timeout_ms": BOUND_S * 1000}))[-1]
                )
                self.assertEqual(end, "(no new output)\n[status: killed]")
                # Ray says STOPPED, or FAILED when the relay's end beat its stop.
                self.assertIn(ray_get(f"/api/jobs/{runs_sid}")["status"], ("STOPPED", "FAILED"))


@unittest.skipIf(
    not (RAY and os.environ.get("JOBS_HOST_RAY_RESTART")),
    "JOBS_HOST_RAY_RESTART is not set (tests/runners/run runs this last on its head, which it restarts)",
)
class HeadRestart(unittest.IsolatedAsyncioTestCase):
    async def test_a_head_restarted_mid_job_leaves_it_lost_with_its_output(self) -> None:
        import subprocess

        with anyio.fail_after(TEST_BOUND_S * 2):
            async with connect(*flags()) as conn:
                job = texts(await conn.call("bash", {"command": "echo before; sleep 600", "runner": "ray"}))[0]
                job = job.removeprefix("started background job ")
                first = texts(
                    await conn.call("job_output", {"job_id": job, "until": "^before$", "timeout_ms": BOUND_S * 1000})
                )[-1]
                sid = submission_id(first)
                subprocess.run([os.environ["JOBS_HOST_RAY_BIN"], "stop", "--force"], capture_output=True, check=False)
                # While the head is away the job is running, and says why it is
                # not followed, once the runner's next look has found it gone.
                away = rf"{job} \[bash\] running \u2014 .* \[ray: {sid} unreachable for \d+ s: "
                deadline = time.monotonic() + BOUND_S
                rows = texts(await conn.call("job_list", {}))[-1]
                while not re.search(away, rows) and time.monotonic() < deadline:
                    await asyncio.sleep(0.1)
                    rows = texts(await conn.call("job_list", {}))[-1]
                self.assertRegex(rows, away)
                started = subprocess.run(["bash", os.environ["JOBS_HOST_RAY_RESTART"]], capture_output=True, text=True)
                self.assertEqual(started.returncode, 0, started.stdout + started.stderr)
                # A new head has no record of the job: lost, what was read kept, and said once.
                announced = await conn.notices.wait_for(job)
                lost = f"[status: failed, lost: the engine has no record of {sid}]"
                self.assertIn(lost, announced.data["text"])
                read = without_placement(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertEqual(read, f"(no new output)\n{lost}")
                self.assertEqual(sum(t.startswith(f"background job {job} ") for t in conn.notices.texts()), 1)


@unittest.skipIf(not (RAY and TOKEN), "no token head (tests/runners/run starts one with RAY_AUTH_MODE=token)")
class TokenHead(unittest.IsolatedAsyncioTestCase):
    async def test_jobs_run_with_the_token_and_not_without(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with connect(*flags(), env={"RAY_AUTH_TOKEN_PATH": os.environ["RAY_AUTH_TOKEN_PATH"]}) as conn:
                job = (await conn.call("bash", {"command": "echo token ok; exit 3", "runner": "ray"})).content[0].text
                self.assertEqual(job, started("bash-1"))
                announced = await conn.notices.wait_for("bash-1")
                self.assertEqual(
                    announced.data["text"], notice("bash-1", "echo token ok; exit 3", "[status: completed, exit code: 3]")
                )
            async with connect(*flags(), env={"RAY_AUTH_TOKEN": "wrong-token"}) as conn:
                result = await conn.call("bash", {"command": "echo hi", "runner": "ray"})
                self.assertTrue(result.is_error, result)
                text = texts(result)[0]
                self.assertIn("refused the request (HTTP 401)", text.replace("HTTP 403", "HTTP 401"))
                self.assertIn("RAY_AUTH_TOKEN", text)
                self.assertNotIn("wrong-token", text)


def _state(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return "Z"


def _closed_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class CuttingProxy:
    """A TCP proxy to the head that can cut every connection it carries (a dropped tail)."""

    def __init__(self, target: str) -> None:
        host, port = target.removeprefix("http://").rsplit(":", 1)
        self.target = (host, int(port))
        self.writers: list[asyncio.StreamWriter] = []
        self.cuts = 0
        self.server: asyncio.Server | None = None
        self.address = ""

    @classmethod
    async def start(cls, target: str) -> "CuttingProxy":
        proxy = cls(target)
        proxy.server = await asyncio.start_server(proxy._serve, "127.0.0.1", 0)
        port = proxy.server.sockets[0].getsockname()[1]
        proxy.address = f"http://127.0.0.1:{port}"
        return proxy

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.target)
        except OSError:
            writer.close()
            return
        self.writers += [writer, up_writer]

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    def cut(self) -> None:
        """Closes every connection now (the client sees its tail break)."""
        if any(not w.is_closing() for w in self.writers):
            self.cuts += 1
        for writer in self.writers:
            transport = writer.transport
            transport.abort()
        self.writers.clear()

    async def close(self) -> None:
        self.cut()
        if self.server:
            self.server.close()
            await self.server.wait_closed()


if __name__ == "__main__":
    unittest.main()
