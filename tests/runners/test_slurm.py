"""Jobs on a real single-node Slurm cluster through `jobs-host mcp --runner slurm` and the MCP
Python SDK.

`tests/runners/run` sets the cluster up (`tests/runners/slurm-cluster`) and sets SLURM_CONF
to its configuration; JOBS_HOST_SLURM_DIR is the directory the jobs' files go to. The node
is this machine, so a job there can be held behind a FIFO gate here.

- `SlurmSemantics`: the shared suite of `test_ray.py` over the Slurm runner.
- `SlurmDurable`: Slurm jobs of a durable session: a daemon killed while a job runs and
  writes, the next client taking it on with every byte once; an end seen before the kill;
  `ps`, `logs -f`, `kill` and `wait`.
- `SlurmOnly`: separate stdout and stderr; `exit 3` reads `exit code: 3` with no `sacct`;
  `scancel` from outside reads `failed`; a signal reaches the batch shell; a job pending on
  a partition that cannot run it says why and can be killed; the exit record beats the
  scheduler's row; a requeue that truncates the output file is said once; what Slurm
  refuses makes no job.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import subprocess
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any

import anyio
from test_ray import GRACE_MS, Semantics, texts  # first: it puts the clients' helpers on the path

from test_clients import BOUND_S, TEST_BOUND_S, connect, notice, open_gate  # noqa: E402

SLURM_CONF = os.environ.get("SLURM_CONF", "")
SLURM_DIR = os.environ.get("JOBS_HOST_SLURM_DIR", "")
SKIP = "SLURM_CONF and JOBS_HOST_SLURM_DIR are not set (tests/runners/run sets a Slurm cluster up)"
PLACEMENT = re.compile(r"^\[slurm: job \d+[^\]\n]*\]$", re.M)


def slurm(*args: str) -> str:
    """A Slurm command's stdout, on the test's cluster."""
    done = subprocess.run(args, capture_output=True, text=True, env={**os.environ, "SLURM_CONF": SLURM_CONF}, check=True)
    return done.stdout


def slurm_id(read: str) -> str:
    found = re.search(r"\[slurm: job (\d+)", read)
    assert found, read
    return found.group(1)


@unittest.skipIf(not SLURM_CONF or not SLURM_DIR, SKIP)
class SlurmSemantics(Semantics):
    __unittest_skip__ = not SLURM_CONF or not SLURM_DIR
    where = {"runner": "slurm"}
    partition = ""

    def flags(self) -> list[str]:
        runner = f"slurm:{self.partition}" if self.partition else "slurm"
        return [
            "--runner",
            runner,
            "--slurm-dir",
            SLURM_DIR,
            "--extensions",
            "ready,limits,input",
            "--kill-grace-ms",
            str(GRACE_MS),
        ]

    def connect(self, *more: str) -> Any:
        return connect(*self.flags(), *more, env={"SLURM_CONF": SLURM_CONF})

    def unplaced(self, text: str) -> str:
        return PLACEMENT.sub("", text).replace("\n\n[status", "\n[status")


@unittest.skipIf(not SLURM_CONF or not SLURM_DIR, SKIP)
class SlurmOnly(SlurmSemantics):
    __unittest_skip__ = not SLURM_CONF or not SLURM_DIR

    # The shared tests are not run twice.
    test_read_once_then_nothing_new = None  # type: ignore[assignment]
    test_incremental_reads_and_a_wait = None  # type: ignore[assignment]
    test_kill_and_list = None  # type: ignore[assignment]
    test_output_limit_stops_the_job = None  # type: ignore[assignment]
    test_a_time_limit_stops_the_job = None  # type: ignore[assignment]
    test_a_big_output_is_capped_as_any = None  # type: ignore[assignment]

    async def up(self, conn: Any, job: str) -> str:
        """Waits for the job's `up` line; answers the read, placement and all."""
        result = await conn.call("job_output", {"job_id": job, "until": "^up$", "timeout_ms": BOUND_S * 1000})
        return texts(result)[-1]

    def test_check_runner_says_the_cluster_is_usable(self) -> None:
        done = subprocess.run(
            [os.environ["JOBS_HOST_BIN"], "check-runner", "slurm", "--json", *self.flags()[:4]],
            capture_output=True,
            text=True,
            timeout=BOUND_S,
            env={**os.environ, "SLURM_CONF": SLURM_CONF},
            check=False,
        )
        self.assertEqual(done.returncode, 0, done)
        found = json.loads(done.stdout)
        self.assertEqual((found["runner"], found["partition"], found["usable"]), ("slurm", None, True), found)
        self.assertTrue(found["engine"].startswith("slurm"), found)  # "slurm 23.11", "slurm-wlm 22.05.8"
        self.assertEqual(found["output_directory"], SLURM_DIR)

    async def test_stderr_is_its_own_and_exit_3_needs_no_accounting(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "echo out; echo err >&2; exit 3")
                await conn.notices.wait_for(job)
                self.assertEqual(await self.read(conn, job), "out\n[stderr]\nerr\n[status: completed, exit code: 3]")
                # This cluster keeps no accounting: the exit record gave the code.
                done = subprocess.run(["sacct", "-n"], capture_output=True, text=True, env={**os.environ, "SLURM_CONF": SLURM_CONF})
                self.assertIn("accounting storage is disabled", done.stderr)

    async def test_a_cancel_from_outside_is_failed_not_killed(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "echo up; sleep 600")
                number = slurm_id(await self.up(conn, job))
                slurm("scancel", number)
                announced = await conn.notices.wait_for(job)
                self.assertIn(
                    f"[status: failed, stopped outside jobs-host: runner slurm reports job {number} CANCELLED]",
                    announced.data["text"],
                )

    async def test_a_signal_reaches_the_batch_shells_command(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "trap 'echo got-hup; exit 9' HUP; echo up; while :; do sleep 0.1; done")
                await self.up(conn, job)
                sent = await conn.call("job_signal", {"job_id": job, "signal": "HUP"})
                self.assertFalse(sent.is_error, sent)
                end = await self.read(conn, job, wait=True, timeout_ms=BOUND_S * 1000)
                # The whole group got it: bash says its `sleep` died of it.
                self.assertTrue(end.startswith("got-hup\n"), end)
                self.assertTrue(end.endswith("\n[status: completed, exit code: 9]"), end)

    async def test_a_job_on_a_partition_that_cannot_run_it_says_why_and_can_be_killed(self) -> None:
        self.partition = "nowhere"
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                job = await self.start(conn, "echo never")
                waited = await self.read(conn, job, wait=True, timeout_ms=3000)
                self.assertEqual(waited, "(no new output)\n[status: running]")
                rows = texts(await conn.call("job_list", {}))[-1]
                self.assertRegex(rows, rf"{job} \[bash\] running \u2014 echo never \[slurm: job \d+ pending: PartitionDown\]")
                await conn.call("job_kill", {"job_id": job})
                end = await self.read(conn, job, wait=True, timeout_ms=BOUND_S * 1000)
                self.assertEqual(end, "(no new output)\n[status: killed]")

    async def test_the_exit_record_beats_the_schedulers_row(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                # The command writes the record as the relay would, then kills the relay:
                # Slurm's row says the batch shell died by SIGKILL, the record says exit 4.
                command = (
                    f"r=$(ls {SLURM_DIR}/*-bash-1.err); r=${{r%.err}}.exit; "
                    'printf "exit 4 run 0\\n" > "$r.tmp" && mv "$r.tmp" "$r"; echo up; kill -9 $PPID; sleep 1'
                )
                job = await self.start(conn, command)
                await conn.notices.wait_for(job)
                end = await self.read(conn, job)
                self.assertTrue(end.startswith("up\n"), end)
                self.assertTrue(end.endswith("[status: completed, exit code: 4]"), end)

    async def test_a_requeue_that_truncates_the_output_is_said_once(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                command = (
                    'if [ "${SLURM_RESTART_COUNT:-0}" = 0 ]; then echo first-run-line-longer-than-the-next; '
                    "echo up; sleep 600; fi; echo again"
                )
                job = await self.start(conn, command)
                number = slurm_id(await self.up(conn, job))
                slurm("scontrol", "requeue", number)
                # It begins again once its old credential expires (5 s on this
                # cluster: `AuthInfo=cred_expire=5`).
                await conn.notices.wait_for(job)
                end = await self.read(conn, job)
                self.assertEqual(end.count("Slurm began the job again"), 1, end)
                self.assertTrue(end.startswith("again\n[stderr]\n"), end)
                self.assertTrue(end.endswith("[status: completed, exit code: 0]"), end)

    async def test_a_cluster_that_is_down_makes_no_job(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            dead = os.path.join(self.tmp.name, "slurm.conf")
            conf = Path(SLURM_CONF).read_text()
            Path(dead).write_text(conf.replace("SlurmctldHost=localhost", "SlurmctldHost=localhost\nSlurmctldPort=1\nMessageTimeout=2"))
            async with connect(*self.flags(), env={"SLURM_CONF": dead}) as conn:
                result = await conn.call("bash", {"command": "echo hi", "runner": "slurm"})
                self.assertTrue(result.is_error, result)
                self.assertIn("runner slurm: sbatch failed: ", result.content[0].text)
                self.assertIn("Unable to contact slurm controller", result.content[0].text)
                self.assertEqual(texts(await conn.call("job_list", {}))[-1], "(no background jobs)")

    async def test_a_controller_restarted_mid_job_loses_nothing(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                gate = self.gate()
                job = await self.start(conn, f"echo up; read g < {gate}; echo after; exit 4")
                await self.up(conn, job)
                script = Path(__file__).with_name("slurm-cluster")
                # Away for 3 s: the poll finds it unreachable, the job runs on.
                restart = await asyncio.create_subprocess_exec(
                    str(script), "restart-controller", os.path.dirname(SLURM_CONF), "3"
                )
                await anyio.sleep(2)
                rows = texts(await conn.call("job_list", {}))[-1]
                await open_gate(gate)
                self.assertEqual(await restart.wait(), 0)
                # Running still, whatever the last poll could say of it.
                self.assertRegex(rows, rf"{job} \[bash\] running .*\[slurm: job \d+")
                end = await self.read(conn, job, wait=True, timeout_ms=BOUND_S * 1000)
                self.assertEqual(end, "after\n[status: completed, exit code: 4]")

    async def test_what_slurm_refuses_makes_no_job(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.connect() as conn:
                result = await conn.call("bash", {"command": "true", "runner": "slurm", "resources": {"cpus": 64}})
                self.assertTrue(result.is_error, result)
                self.assertIn("runner slurm: sbatch failed: ", result.content[0].text)
                for extra in ({"stdin": True}, {"memory_bytes": 1 << 30}):
                    refused = await conn.call("bash", {"command": "true", "runner": "slurm", **extra})
                    self.assertTrue(refused.is_error, (extra, refused))
                self.assertEqual(texts(await conn.call("job_list", {}))[-1], "(no background jobs)")


@unittest.skipIf(not SLURM_CONF or not SLURM_DIR, SKIP)
class SlurmDurable(unittest.IsolatedAsyncioTestCase):
    """Slurm jobs of a durable session (`mcp --session`): a daemon killed while they run,
    the next client taking them on, and the person's view (`ps`, `logs`, `kill`, `wait`)."""

    async def asyncSetUp(self) -> None:
        asyncio.get_running_loop().slow_callback_duration = 10.0
        self.tmp = tempfile.TemporaryDirectory()
        os.chmod(self.tmp.name, 0o700)
        self.env = {
            "XDG_RUNTIME_DIR": self.tmp.name,
            "XDG_STATE_HOME": os.path.join(self.tmp.name, "state"),
            "SLURM_CONF": SLURM_CONF,
        }
        self.ids: list[str] = []

    async def asyncTearDown(self) -> None:
        self.cli("daemon", "--stop")
        for number in self.ids:
            subprocess.run(["scancel", number], capture_output=True, env={**os.environ, "SLURM_CONF": SLURM_CONF})
        self.tmp.cleanup()

    def session(self, key: str = "k") -> Any:
        flags = ["--runner", "slurm", "--slurm-dir", SLURM_DIR, "--extensions", "ready,limits,input"]
        return connect(*flags, "--session", key, env=self.env)

    def cli(self, *args: str) -> Any:
        return subprocess.run(
            [os.environ["JOBS_HOST_BIN"], *args], env={**os.environ, **self.env}, capture_output=True, text=True, timeout=BOUND_S
        )

    def kill_daemon(self) -> None:
        pid = int(Path(self.tmp.name, "jobs-host", "daemon.lock").read_text().strip())
        os.kill(pid, 9)
        deadline = time.monotonic() + BOUND_S
        while _running(pid):
            self.assertLess(time.monotonic(), deadline)
            time.sleep(0.01)

    async def start(self, conn: Any, command: str) -> tuple[str, str]:
        result = await conn.call("bash", {"command": command, "runner": "slurm"})
        self.assertFalse(result.is_error, result)
        job = texts(result)[0].removeprefix("started background job ")
        rows = texts(await conn.call("job_list", {}))[-1]
        number = slurm_id(next(row for row in rows.splitlines() if row.startswith(f"{job} ")))
        self.ids.append(number)
        return job, number

    def unplaced(self, text: str) -> str:
        return PLACEMENT.sub("", text).replace("\n\n[status", "\n[status")

    async def test_a_daemon_killed_mid_job_loses_and_repeats_nothing(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            gate = os.path.join(self.tmp.name, "gate")
            os.mkfifo(gate)
            command = (
                f"for i in $(seq 1 30); do echo line-$i; echo err-$i >&2; done; read g < {gate}; "
                "for i in $(seq 31 90); do echo line-$i; sleep 0.01; done; exit 5"
            )
            async with self.session() as conn:
                job, number = await self.start(conn, command)
                first = texts(
                    await conn.call("job_output", {"job_id": job, "until": "^line-30$", "timeout_ms": BOUND_S * 1000})
                )[-1]
                self.assertIn(f"[slurm: job {number}", first)
                # The daemon dies while the job runs on, and goes on writing.
                self.kill_daemon()
                await open_gate(gate)
            # The journal names the job's runner and Slurm id while no daemon runs.
            shown = self.cli("ps", "--journal", "--session", "k")
            self.assertIn(f"left on runner slurm as {number}", shown.stdout + shown.stderr)
            # And its output, stdout and stderr apart.
            kept = self.cli("logs", "--session", "k", job)
            self.assertEqual(kept.returncode, 0, kept.stderr)
            taken = kept.stdout.splitlines()
            self.assertEqual(taken, [f"line-{i}" for i in range(1, len(taken) + 1)])
            errors = self.cli("logs", "--stderr", "--session", "k", job)
            self.assertEqual(errors.stdout, "".join(f"err-{i}\n" for i in range(1, 31)), errors.stderr)
            async with self.session() as conn:
                announced = await conn.notices.wait_for(job)
                self.assertEqual(announced.data["text"], notice(job, command, "[status: completed, exit code: 5]"))
                rest = self.unplaced(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertTrue(rest.endswith("\n[status: completed, exit code: 5]"), rest)
                lines = [line for line in (first + "\n" + rest).split("\n") if line.startswith("line-")]
                self.assertEqual(lines, [f"line-{i}" for i in range(1, 91)])
                again = self.unplaced(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertEqual(again, "(no new output)\n[status: completed, exit code: 5]")
                await conn.call("job_list", {})
                self.assertEqual(sum(t.startswith(f"background job {job} ") for t in conn.notices.texts()), 1)

    async def test_an_end_seen_before_the_kill_is_not_told_again(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            async with self.session() as conn:
                job, _ = await self.start(conn, "printf 'a\\nb\\n'; echo e >&2; exit 2")
                await conn.notices.wait_for(job)
                # A reply records what the model was told before it goes out.
                await conn.call("job_list", {})
                self.kill_daemon()
            # Its files went with the session once it ended.
            self.assertEqual(os.listdir(SLURM_DIR), [])
            async with self.session() as conn:
                # Taken on as it ended, its output unread, its end told once.
                read = self.unplaced(texts(await conn.call("job_output", {"job_id": job}))[-1])
                self.assertEqual(read, "a\nb\n[stderr]\ne\n[status: completed, exit code: 2]")
                await conn.call("job_list", {})
                self.assertEqual(conn.notices.texts(), [])

    async def test_ps_logs_kill_and_wait_on_slurm_jobs(self) -> None:
        with anyio.fail_after(TEST_BOUND_S):
            gate = os.path.join(self.tmp.name, "gate")
            os.mkfifo(gate)
            async with self.session() as conn:
                ends, _ = await self.start(conn, f"echo one; read g < {gate}; echo two; exit 3")
                runs, number = await self.start(conn, "echo up; sleep 600")
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
                end = self.unplaced(
                    texts(await conn.call("job_output", {"job_id": runs, "wait": True, "timeout_ms": BOUND_S * 1000}))[-1]
                )
                self.assertEqual(end, "(no new output)\n[status: killed]")
                state = subprocess.run(
                    ["squeue", "-h", "-t", "all", "-j", number, "-o", "%T"],
                    capture_output=True,
                    text=True,
                    env={**os.environ, "SLURM_CONF": SLURM_CONF},
                )
                self.assertEqual(state.stdout.strip(), "CANCELLED")


def _running(pid: int) -> bool:
    """Whether `pid` still runs: not a zombie, and not gone, which it may be
    between any two looks at /proc (its name may hold spaces: the state is
    after its last parenthesis)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False
