"""A job registry of real child processes, in Python.

Each shell job runs `bash -c <command>` as the leader of a new session (so of a
new process group), with stdin from /dev/null. Its output is read by two
threads into bounded buffers: the unread delta for consuming reads, and the
whole output (head and tail kept, the middle counted) for excerpts. Cancelling
sends SIGTERM to the whole group, then SIGKILL after a grace period.

Ownership follows the contract: an owned job is visible only to its owner; an
unowned one to everybody. Ids are `<kind>-<n>`, one counter per kind.
"""

import os
import signal
import subprocess
import threading
import time

from .guest import RegistryError

TERMINAL = ("completed", "killed", "failed")


def now_ms():
    return int(time.time() * 1000)


def _cut_head(data, n):
    """The first `n` bytes of `data`, without a character split at the end."""
    if len(data) <= n:
        return data
    end = n
    back = 0
    while end > 0 and back < 3 and (data[end] & 0xC0) == 0x80:
        end -= 1
        back += 1
    return data[:end]


def _cut_tail(data, n):
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

    def __init__(self, keep_head, keep_tail):
        self.keep_head = keep_head
        self.keep_tail = keep_tail
        self.head = bytearray()
        self.tail = bytearray()
        self.middle = 0

    def add(self, data):
        take = min(len(data), self.keep_head - len(self.head))
        self.head.extend(data[:take])
        self.tail.extend(data[take:])
        if len(self.tail) > self.keep_tail:
            cut = len(self.tail) - self.keep_tail
            self.middle += cut
            del self.tail[:cut]

    def size(self):
        return len(self.head) + self.middle + len(self.tail)

    def last_byte(self):
        return (self.tail or self.head)[-1:]


class _Output:
    """One job's output: the unread delta (bounded; what is dropped is said) and
    the whole (stdout, then stderr after a `[stderr]` line), ends kept."""

    def __init__(self, max_pending, keep_head, keep_tail):
        self.max_pending = max_pending
        self.pending = {"stdout": bytearray(), "stderr": bytearray()}
        self.dropped = 0
        self.streams = {"stdout": _Stream(keep_head, keep_tail), "stderr": _Stream(keep_head, keep_tail)}

    def add(self, stream, data):
        room = max(self.max_pending - len(self.pending["stdout"]) - len(self.pending["stderr"]), 0)
        self.pending[stream].extend(data[:room])
        self.dropped += max(len(data) - room, 0)
        self.streams[stream].add(data)

    def take_delta(self):
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

    def _segments(self):
        """The whole output as byte runs and gaps (ints: bytes not kept)."""
        out, err = self.streams["stdout"], self.streams["stderr"]
        segs = [bytes(out.head), out.middle, bytes(out.tail)]
        if err.size():
            sep = b"\n" if out.size() and out.last_byte() != b"\n" else b""
            segs += [sep + b"[stderr]\n", bytes(err.head), err.middle, bytes(err.tail)]
        return segs

    def excerpt(self, window):
        segs = self._segments()
        total = sum(x if isinstance(x, int) else len(x) for x in segs)
        gaps = any(isinstance(x, int) and x for x in segs)
        if not gaps and total <= window["whole_up_to"]:
            whole = b"".join(x for x in segs if not isinstance(x, int))
            return whole.decode("utf-8", "replace"), "", 0

        def run(seq):
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
            tail = tail[len(head) + len(tail) - total:]
        omitted = total - len(head) - len(tail)
        return head.decode("utf-8", "replace"), tail.decode("utf-8", "replace"), omitted


class _Job:
    def __init__(self, job_id, kind, label, owner, output_limit_bytes, output):
        self.id = job_id
        self.kind = kind
        self.label = label
        self.owner = owner
        self.output_limit_bytes = output_limit_bytes
        self.status = "running"
        self.detail = None
        self.started_at = now_ms()
        self.finished_at = None
        self.reported = False
        self.waiters = 0
        self.out = output
        self.process = None
        self.settled = threading.Event()

    def snapshot(self):
        return {"id": self.id, "kind": self.kind, "label": self.label, "status": self.status,
                "detail": self.detail, "started_at": self.started_at, "finished_at": self.finished_at,
                "output_limit_bytes": self.output_limit_bytes, "reported": self.reported}


class Registry:
    """Jobs, their processes and their owners. Safe to use from many threads."""

    def __init__(self, grace_seconds=2.0, max_pending_bytes=1 << 20, keep_bytes=1 << 20):
        self._lock = threading.Condition()
        self._jobs = {}
        self._order = []
        self._counters = {}
        self._listeners = []
        self.grace_seconds = grace_seconds
        self._limits = (max_pending_bytes, keep_bytes // 2, keep_bytes // 2)

    # -- producers ------------------------------------------------------------

    def start_shell(self, command, owner=None, workdir=None, output_limit_bytes=None, kind="bash"):
        """Starts `bash -c command` and returns its id (`bash-<n>`)."""
        if not command or not command.strip():
            raise ValueError("command must not be empty")
        try:
            process = subprocess.Popen(
                ["bash", "-c", command], cwd=workdir, stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
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
        readers = [threading.Thread(target=self._pump, args=(job, process.stdout, "stdout"), daemon=True),
                   threading.Thread(target=self._pump, args=(job, process.stderr, "stderr"), daemon=True)]
        for r in readers:
            r.start()
        threading.Thread(target=self._reap, args=(job, readers), daemon=True).start()
        return job.id

    def _pump(self, job, pipe, stream):
        while True:
            data = pipe.read1(65536)
            if not data:
                break
            with self._lock:
                job.out.add(stream, data)
        pipe.close()

    def _reap(self, job, readers):
        code = job.process.wait()
        for r in readers:
            r.join()
        if code < 0:
            self._settle(job, "killed", f"signal: {signal.Signals(-code).name}")
        else:
            self._settle(job, "completed", f"exit code: {code}")

    def _settle(self, job, status, detail):
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

    def on_job_done(self, listener):
        """Calls `listener(snapshot, owner)` for every settlement."""
        with self._lock:
            self._listeners.append(listener)

    # -- the owner-scoped view the guest sees ----------------------------------

    def _visible(self, caller, job_id):
        job = self._jobs.get(job_id)
        if job is None:
            raise RegistryError("unknown-job", job_id)
        if job.owner is not None and job.owner != caller:
            raise RegistryError("foreign-job", job_id)
        return job

    def list_jobs(self, caller):
        with self._lock:
            return [self._jobs[i].snapshot() for i in self._order
                    if self._jobs[i].owner is None or self._jobs[i].owner == caller]

    def get(self, caller, job_id):
        with self._lock:
            return self._visible(caller, job_id).snapshot()

    def read(self, caller, job_id):
        with self._lock:
            job = self._visible(caller, job_id)
            text = job.out.take_delta()
            if job.status in TERMINAL:
                job.reported = True
            return text, job.snapshot()

    def kill(self, caller, job_id, reason=None):
        with self._lock:
            job = self._visible(caller, job_id)
            job.reported = True
            if job.status in TERMINAL or job.process is None:
                return "already-finished"
            job.status = "stopping"
            pgid = job.process.pid
        self._signal_group(pgid, signal.SIGTERM)
        timer = threading.Timer(self.grace_seconds, self._kill_if_alive, args=(job,))
        timer.daemon = True
        timer.start()
        return "requested"

    def _kill_if_alive(self, job):
        if not job.settled.is_set():
            self._signal_group(job.process.pid, signal.SIGKILL)

    @staticmethod
    def _signal_group(pgid, sig):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            pass

    def output(self, caller, job_id, window):
        with self._lock:
            job = self._visible(caller, job_id)
            head, tail, omitted = job.out.excerpt(window)
            return {"head": head, "tail": tail, "omitted_bytes": omitted, "job": job.snapshot()}

    def wait(self, caller, job_id, timeout_ms, cancel=None):
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

    def now_ms(self):
        return now_ms()

    def inspect(self, job_id):
        """The job as it is now, whoever owns it (None once gone)."""
        with self._lock:
            job = self._jobs.get(job_id)
            return None if job is None else job.snapshot()

    def claim_notice(self, job_id):
        """Marks the job reported; True only for the first claim of an unreported job."""
        with self._lock:
            job = self._jobs.get(job_id)
            if job is None or job.reported:
                return False
            job.reported = True
            return True

    def close(self):
        """Ends every live job's process group (TERM, then KILL after the grace)."""
        with self._lock:
            live = [j for j in self._jobs.values() if j.status not in TERMINAL and j.process is not None]
            for j in live:
                j.reported = True
        for j in live:
            self._signal_group(j.process.pid, signal.SIGTERM)
        deadline = time.monotonic() + self.grace_seconds
        for j in live:
            j.settled.wait(max(0.0, deadline - time.monotonic()))
            if not j.settled.is_set():
                self._signal_group(j.process.pid, signal.SIGKILL)
                j.settled.wait()
