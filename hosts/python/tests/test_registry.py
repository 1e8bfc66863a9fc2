"""The Python reference host with real processes, through the real component."""

import os
import tempfile
import threading
import time
import unittest
from collections.abc import Callable

from harness_jobs import Plugin, Registry

WASM = os.environ.get(
    "TOOL_JOBS_WASM", os.path.join(os.path.dirname(__file__), "..", "..", "..", "target", "tool-jobs.wasm")
)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False


def until(check: Callable[[], bool], what: str) -> None:
    # Bounded only against hanging (a minute, for loaded machines); the condition decides.
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.005)
    raise AssertionError(f"timed out waiting for {what}")


class RegistryTest(unittest.TestCase):
    def setUp(self) -> None:
        self._tmp = tempfile.TemporaryDirectory()
        self.tmp = self._tmp.name

    def tearDown(self) -> None:
        self._tmp.cleanup()

    def test_a_spawn_that_fails_is_a_job_killed_before_exit_whose_next_read_says_why_once(self) -> None:
        registry = Registry()
        plugin = Plugin(WASM, registry)
        job = registry.start_shell("true", owner="s", workdir=os.path.join(self.tmp, "missing"))
        out = plugin.invoke("s", "job_output", {"job_id": job, "wait": True, "timeout_ms": 10000})
        self.assertRegex(
            out["text"],
            r"^\[stderr\]\nspawn failed: .*No such file or directory.*\n\[status: killed, killed before exit\]$",
        )
        again = plugin.invoke("s", "job_output", {"job_id": job})
        self.assertEqual(again["text"], "(no new output)\n[status: killed, killed before exit]")

    def test_a_kill_ends_the_whole_group_even_a_child_ignoring_term(self) -> None:
        registry = Registry(grace_seconds=0.2)
        plugin = Plugin(WASM, registry)
        job = registry.start_shell("trap '' TERM; sleep 60 & echo $!; wait", owner="s")
        until(lambda: registry._jobs[job].out.streams["stdout"].size() > 0, "the child pid")
        child = int(registry.read("s", job)[0].strip())
        self.assertTrue(alive(child))
        self.assertEqual(
            plugin.invoke("s", "job_kill", {"job_id": job})["text"], f"requested cancellation of job {job}"
        )
        out = plugin.invoke("s", "job_output", {"job_id": job, "wait": True, "timeout_ms": 10000})
        self.assertTrue(out["text"].endswith("[status: killed, signal: SIGKILL]"), out["text"])
        until(lambda: not alive(child), "the child to die")

    def test_a_timed_out_wait_leaves_the_job_and_owners_are_fenced(self) -> None:
        registry = Registry()
        plugin = Plugin(WASM, registry, '{"waitTimeoutMs":10,"maxWaitTimeoutMs":20}')
        job = registry.start_shell("sleep 60", owner="alice")
        out = plugin.invoke("alice", "job_output", {"job_id": job, "wait": True, "timeout_ms": 600000})
        self.assertEqual(out["text"], "(no new output)\n[status: running]")
        self.assertEqual(
            plugin.invoke("bob", "job_output", {"job_id": job})["text"], f"Error: job {job} belongs to another session"
        )
        self.assertEqual(plugin.invoke("bob", "job_list", {})["text"], "(no background jobs)")
        self.assertEqual(
            plugin.invoke("alice", "job_output", {"job_id": "bash-99"})["text"], "Error: unknown job bash-99"
        )
        registry.close()
        self.assertEqual(registry.get("alice", job)["status"], "killed")

    def test_an_aborted_wait_says_so_and_leaves_the_job_alone(self) -> None:
        registry = Registry()
        plugin = Plugin(WASM, registry)
        job = registry.start_shell("sleep 60", owner="s")
        cancel = threading.Event()
        result: dict[str, object] = {}
        t = threading.Thread(
            target=lambda: result.update(plugin.invoke("s", "job_output", {"job_id": job, "wait": True}, cancel))
        )
        t.start()
        until(lambda: registry._jobs[job].waiters == 1, "the waiter")
        cancel.set()
        t.join()
        self.assertEqual(result["text"], "Error: wait aborted")
        self.assertEqual(registry.get("s", job)["status"], "running")
        registry.close()

    def test_output_past_the_bound_is_dropped_and_said_so(self) -> None:
        registry = Registry(max_pending_bytes=1000)
        plugin = Plugin(WASM, registry)
        job = registry.start_shell('head -c 5000 /dev/zero | tr "\\0" x; echo oops >&2', owner="s")
        out = plugin.invoke("s", "job_output", {"job_id": job, "wait": True, "timeout_ms": 10000})["text"]
        # The two pipes are read side by side, so all or part of "oops\n" may take its
        # share of the bound before stdout fills it; either way exactly 1000 bytes are kept.
        xs = len(out) - len(out.lstrip("x"))
        err = out[xs:].partition("\n[stderr]\n")[2].partition("[some output was dropped")[0]
        if not "oops\n".startswith(err):
            err = err[:-1]  # the newline the renderer adds before the drop line
        self.assertEqual(xs + len(err), 1000, out[:50])
        self.assertIn("[some output was dropped from memory; full output: (unavailable)]", out)
        self.assertTrue(out.endswith("[status: completed, exit code: 0]"), out)
        c = Plugin(WASM, registry, '{"profile":"c","maxResultBytes":200}')
        status = c.invoke("s", "job_status", {"id": job})["text"]
        self.assertIn("bytes truncated]", status)
        self.assertTrue(status.endswith("[stderr]\noops\n[exit code: 0]"), status)

    def test_an_unread_finished_job_gets_exactly_one_notice(self) -> None:
        registry = Registry()
        notices: list[tuple[str | None, str, str]] = []
        Plugin(WASM, registry, on_notice=lambda owner, lane, n: notices.append((owner, lane, n["text"])))
        # Listeners run in order: once this one heard a job, the plugin has decided on it.
        heard: set[str] = set()
        registry.on_job_done(lambda job, owner: heard.add(job["id"]))
        quiet = registry.start_shell("true", owner="s")
        # This one ends only once a wait is pending on it, so the wait sees the end.
        flag = os.path.join(self.tmp, "go")
        read = registry.start_shell(f"while [ ! -e {flag} ]; do sleep 0.01; done", owner="s")
        unowned = registry.start_shell("true")
        waiter = threading.Thread(target=registry.wait, args=("s", read, 10000))
        waiter.start()
        until(lambda: registry._jobs[read].waiters == 1, "the waiter")
        open(flag, "w").close()
        waiter.join()
        until(lambda: heard == {quiet, read, unowned}, "every settlement")
        self.assertEqual(
            notices,
            [
                (
                    "s",
                    "inject",
                    f"background job {quiet} (bash: true) finished "
                    "[status: completed, exit code: 0]. Read its output with job_output.",
                )
            ],
        )


if __name__ == "__main__":
    unittest.main()
