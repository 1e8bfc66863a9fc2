"""A job registry of real child processes, in Python.

Each shell job runs `bash -c <command>` as the leader of a new session (so of a
new process group), with stdin from /dev/null. Its output is read by two
threads into bounded buffers: the unread delta for consuming reads, and the
whole output (head and tail kept, the middle counted) for excerpts. Cancelling
sends SIGTERM to the whole group, then SIGKILL after a grace period.

Ownership follows the contract: an owned job is visible only to its owner; an
unowned one to everybody. Ids are `<kind>-<n>`, one counter per kind.
"""

from __future__ import annotations

import io
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable

from .guest import RegistryError
from .types import ExcerptWindow, JobSnapshot, JobStatus, KillOutcome, OutputExcerpt

# Called with a job's snapshot and its owner when the job settles.
Listener = Callable[[JobSnapshot, "str | None"], None]

TERMINAL: tuple[JobStatus, ...] = ("completed", "killed", "failed")


def now_ms() -> int:
    return int(time.time() * 1000)


def _cut_head(data: bytes, n: int) -> bytes:
    """The first `n` bytes of `data`, without a character split at the end."""
    if len(data) <= n:
        return data
    end = n
    back = 0
    while end > 0 and back < 3 and (data[end] & 0xC0) == 0x80:
        end -= 1
        back += 1
    return data[:end]


def _cut_tail(data: bytes, n: int) -> bytes:
    """The last `n` bytes of `data`, without continuation bytes at the start."""
    if len(data) <= n:
        return data
    start = len(data) - n
    while start < len(data) and (data[start] & 0xC0) == 0x80:
        start += 1
    return data[start:]


class _Stream:
    """Everything one stream wrote: its first and last bytes, and how many
    between them were not kept."""

    def __init__(self, keep_head: int, keep_tail: int) -> None:
        self.keep_head = keep_head
        self.keep_tail = keep_tail
        self.head = bytearray()
        self.tail = bytearray()
        self.middle = 0

    def add(self, data: bytes) -> None:
        take = min(len(data), self.keep_head - len(self.head))
        self.head.extend(data[:take])
        self.tail.extend(data[take:])
        if len(self.tail) > self.keep_tail:
            cut = len(self.tail) - self.keep_tail
            self.middle += cut
            del self.tail[:cut]

    def size(self) -> int:
        return len(self.head) + self.middle + len(self.tail)

    def last_byte(self) -> bytearray:
        return (self.tail or self.head)[-1:]


class _Output:
    """One job's output: the unread delta (bounded; what is dropped is said) and
    the whole (stdout, then stderr after a `[stderr]` line), ends kept."""

    def __init__(self, max_pending: int, keep_head: int, keep_tail: int) -> None:
        self.max_pending = max_pending
        self.pending = {"stdout": bytearray(), "stderr": bytearray()}
        self.dropped = 0
        self.streams = {"stdout": _Stream(keep_head, keep_tail), "stderr": _Stream(keep_head, keep_tail)}

    def add(self, stream: str, data: bytes) -> None:
        room = max(self.max_pending - len(self.pending["stdout"]) - len(self.pending["stderr"]), 0)
        self.pending[stream].extend(data[:room])
        self.dropped += max(len(data) - room, 0)
        self.streams[stream].add(data)

    def take_delta(self) -> str:
        out = self.pending["stdout"].decode("utf-8", "replace")
        err = self.pending["stderr"].decode("utf-8", "replace")
        self.pending = {"stdout": bytearray(), "stderr": bytearray()}
        if err:
            if out and not out.endswith("\n"):
                out += "\n"
            out += "[stderr]\n" + err
        if self.dropped:
            if out and not out.endswith("\n"):
                out += "\n"
            out += "[some output was dropped from memory; full output: (unavailable)]"
            self.dropped = 0
        return out

    def _segments(self) -> list[bytes | int]:
        """The whole output as byte runs and gaps (ints: bytes not kept)."""
        out, err = self.streams["stdout"], self.streams["stderr"]
        segs: list[bytes | int] = [bytes(out.head), out.middle, bytes(out.tail)]
        if err.size():
            sep = b"\n" if out.size() and out.last_byte() != b"\n" else b""
            segs += [sep + b"[stderr]\n", bytes(err.head), err.middle, bytes(err.tail)]
        return segs

    def excerpt(self, window: ExcerptWindow) -> tuple[str, str, int]:
        segs = self._segments()
        total = sum(x if isinstance(x, int) else len(x) for x in segs)
        gaps = any(isinstance(x, int) and x for x in segs)
        if not gaps and total <= window["whole_up_to"]:
            whole = b"".join(x for x in segs if not isinstance(x, int))
            return whole.decode("utf-8", "replace"), "", 0

        def run(seq: list[bytes | int]) -> bytes:
            # The bytes kept from one end up to the first gap.
            got = bytearray()
            for x in seq:
                if isinstance(x, int):
                    if x:
                        break
                    continue
                got.extend(x)
            return bytes(got)

        front = run(segs)
        back = run([x if isinstance(x, int) else x[::-1] for x in reversed(segs)])[::-1]
        head = _cut_head(front, window["head_bytes"])
        tail = _cut_tail(back, window["tail_bytes"]) if window["tail_bytes"] else b""
        if len(head) + len(tail) > total:
            tail = tail[len(head) + len(tail) - total :]
        omitted = total - len(head) - len(tail)
        return head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"), omitted


class _Job:
    def __init__(
        self,
        job_id: str,
        kind: str,
        label: str,
        owner: str | None,
        output_limit_bytes: int | None,
        output: _Output,
    ) -> None:
        self.id = job_id
        self.kind = kind
        self.label = label
        self.owner = owner
        self.output_limit_bytes = output_limit_bytes
        self.status: JobStatus = "running"
        self.detail: str | None = None
        self.started_at = now_ms()
        self.finished_at: int | None = None
        self.reported = False
        self.waiters = 0
        self.out = output
        self.process: subprocess.Popen[bytes] | None = None
        self.settled = threading.Event()

    def snapshot(self) -> JobSnapshot:
        return {
            "id": self.id,
            "kind": self.kind,
            "label": self.label,
            "status": self.status,
            "detail": self.detail,
            "started_at": self.started_at,
            "finished_at": self.finished_at,
            "output_limit_bytes": self.output_limit_bytes,
            "reported": self.reported,
        }


class Registry:
    """Jobs, their processes and their owners. Safe to use from many threads."""

    def __init__(self, grace_seconds: float = 2.0, max_pending_bytes: int = 1 << 20, keep_bytes: int = 1 << 20) -> None:
        self._lock = threading.Condition()
        self._jobs: dict[str, _Job] = {}
        self._order: list[str] = []
        self._counters: dict[str, int] = {}
        self._listeners: list[Listener] = []
        self.grace_seconds = grace_seconds
        self._limits = (max_pending_bytes, keep_bytes // 2, keep_bytes // 2)

    # -- producers ------------------------------------------------------------

    def start_shell(
        self,
        command: str,
        owner: str | None = None,
        workdir: str | os.PathLike[str] | None = None,
        output_limit_bytes: int | None = None,
        kind: str = "bash",
    ) -> str:
        """Starts `bash -c command` and returns its id (`bash-<n>`)."""
        if not command or not command.strip():
            raise ValueError("command must not be empty")
        process: subprocess.Popen[bytes] | None
        try:
            process = subprocess.Popen(
                ["bash", "-c", command],
                cwd=workdir,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,
            )
        except OSError as e:
            # The contract's spawn failure: killed before exit, and the next read says why.
            process = None
            failure = f"spawn failed: {e}"
        with self._lock:
            n = self._counters.get(kind, 0) + 1
            self._counters[kind] = n
            job = _Job(f"{kind}-{n}", kind, command, owner, output_limit_bytes, _Output(*self._limits))
            job.process = process
            self._jobs[job.id] = job
            self._order.append(job.id)
            if process is None:
                job.out.add("stderr", failure.encode())
        if process is None:
            self._settle(job, "killed", "killed before exit")
            return job.id
        readers = [
            threading.Thread(target=self._pump, args=(job, process.stdout, "stdout"), daemon=True),
            threading.Thread(target=self._pump, args=(job, process.stderr, "stderr"), daemon=True),
        ]
        for r in readers:
            r.start()
        threading.Thread(target=self._reap, args=(job, process, readers), daemon=True).start()
        return job.id

    def _pump(self, job: _Job, pipe: io.BufferedReader, stream: str) -> None:
        while True:
            data = pipe.read1(65536)
            if not data:
                break
            with self._lock:
                job.out.add(stream, data)
        pipe.close()

    def _reap(self, job: _Job, process: subprocess.Popen[bytes], readers: list[threading.Thread]) -> None:
        code = process.wait()
        for r in readers:
            r.join()
        if code < 0:
            self._settle(job, "killed", f"signal: {signal.Signals(-code).name}")
        else:
            self._settle(job, "completed", f"exit code: {code}")

    def _settle(self, job: _Job, status: JobStatus, detail: str) -> None:
        with self._lock:
            if job.status in TERMINAL:
                return
            job.status = status
            job.detail = detail
            job.finished_at = now_ms()
            if job.waiters:
                job.reported = True
            snapshot = job.snapshot()
            job.settled.set()
            self._lock.notify_all()
            listeners = list(self._listeners)
        # Announced last, outside the lock: a listener may call back in.
        for listener in listeners:
            try:
                listener(snapshot, job.owner)
            except Exception as e:  # a listener's failure is its own
                print(f"jobs: onJobDone listener threw for {job.id}: {e}")

    def on_job_done(self, listener: Listener) -> None:
        """Calls `listener(snapshot, owner)` for every settlement."""
        with self._lock:
            self._listeners.append(listener)

    # -- the owner-scoped view the guest sees ----------------------------------

    def _visible(self, caller: str | None, job_id: str) -> _Job:
        job = self._jobs.get(job_id)
        if job is None:
            raise RegistryError("unknown-job", job_id)
        if job.owner is not None and job.owner != caller:
            raise RegistryError("foreign-job", job_id)
        return job

    def list_jobs(self, caller: str | None) -> list[JobSnapshot]:
        with self._lock:
            return [
                self._jobs[i].snapshot()
                for i in self._order
                if self._jobs[i].owner is None or self._jobs[i].owner == caller
            ]

    def get(self, caller: str | None, job_id: str) -> JobSnapshot:
        with self._lock:
            return self._visible(caller, job_id).snapshot()

    def read(self, caller: str | None, job_id: str) -> tuple[str, JobSnapshot]:
        with self._lock:
            job = self._visible(caller, job_id)
            text = job.out.take_delta()
            if job.status in TERMINAL:
                job.reported = True
            return text, job.snapshot()

    def kill(self, caller: str | None, job_id: str, reason: str | None = None) -> KillOutcome:
        with self._lock:
            job = self._visible(caller, job_id)
            job.reported = True
            if job.status in TERMINAL or job.process is None:
                return "already-finished"
            job.status = "stopping"
            pgid = job.process.pid
        self._signal_group(pgid, signal.SIGTERM)
        timer = threading.Timer(self.grace_seconds, self._kill_if_alive, args=(job, pgid))
        timer.daemon = True
        timer.start()
        return "requested"

    def _kill_if_alive(self, job: _Job, pgid: int) -> None:
        if not job.settled.is_set():
            self._signal_group(pgid, signal.SIGKILL)

    @staticmethod
    def _signal_group(pgid: int, sig: signal.Signals) -> None:
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass

    def output(self, caller: str | None, job_id: str, window: ExcerptWindow) -> OutputExcerpt:
        with self._lock:
            job = self._visible(caller, job_id)
            head, tail, omitted = job.out.excerpt(window)
            return {"head": head, "tail": tail, "omitted_bytes": omitted, "job": job.snapshot()}

    def wait(
        self, caller: str | None, job_id: str, timeout_ms: int, cancel: threading.Event | None = None
    ) -> JobSnapshot:
        """Waits until the job is terminal or `timeout_ms` passes; never cancels it.
        `cancel` (a threading.Event) ends the wait with `wait-aborted`."""
        deadline = time.monotonic() + timeout_ms / 1000
        with self._lock:
            job = self._visible(caller, job_id)
            job.waiters += 1
            try:
                while job.status not in TERMINAL:
                    if cancel is not None and cancel.is_set():
                        raise RegistryError("wait-aborted")
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break
                    # Wake at least every 50 ms to notice a cancellation.
                    self._lock.wait(min(left, 0.05))
            finally:
                job.waiters -= 1
            if job.status in TERMINAL:
                job.reported = True
            return job.snapshot()

    def now_ms(self) -> int:
        return now_ms()

    def inspect(self, job_id: str) -> JobSnapshot | None:
        """The job as it is now, whoever owns it (None once gone)."""
        with self._lock:
            job = self._jobs.get(job_id)
            return None if job is None else job.snapshot()

    def claim_notice(self, job_id: str) -> bool:
        """Marks the job reported; True only for the first claim of an unreported job."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.reported:
                return False
            job.reported = True
            return True

    def close(self) -> None:
        """Ends every live job's process group (TERM, then KILL after the grace)."""
        with self._lock:
            live = [
                (j, j.process.pid) for j in self._jobs.values() if j.status not in TERMINAL and j.process is not None
            ]
            for j, _ in live:
                j.reported = True
        for _, pgid in live:
            self._signal_group(pgid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_seconds
        for j, pgid in live:
            j.settled.wait(max(0.0, deadline - time.monotonic()))
            if not j.settled.is_set():
                self._signal_group(pgid, signal.SIGKILL)
                j.settled.wait()
