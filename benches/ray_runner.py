"""The Ray runner's budgets, measured against a live head (see BENCHMARKS.md).

    JOBS_HOST_RAY=http://127.0.0.1:8265 target/venv/bin/python benches/ray_runner.py [--jobs 100]

Through `jobs-host mcp --runner ray=...` and the MCP Python SDK (JOBS_HOST_BIN, by
default target/release/jobs-host), paired in one run:

- the start answer (`started background job`) against the submit's own HTTP time (a
  POST of the same kind of job straight to the head);
- how long output a remote job writes takes to be readable through `job_output` (the job
  prints its own clock; a reader polls every 20 ms);
- the end's notice against the engine's own end time of the job;
- `job_list` with N remote jobs against N local ones; the host's RSS per remote job; the
  host's CPU while the remote jobs idle;
- with `--durable`, only the start answer in a durable session (`--session`: the job's
  log kept in a file, its row in the journal before the answer) against a plain one,
  alternating. Each start's job is killed at once, which Ray keeps PENDING: use a fresh
  head for each run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "clients" / "python"))
os.environ.setdefault("JOBS_HOST_BIN", str(ROOT / "target" / "release" / "jobs-host"))
import test_clients  # noqa: E402

RAY = os.environ["JOBS_HOST_RAY"]


def post(path: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(RAY + path, data=json.dumps(body).encode(), method="POST")
    request.add_header("Content-Type", "application/json")
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())


def get(path: str) -> Any:
    with urllib.request.urlopen(RAY + path, timeout=60) as answer:
        return json.loads(answer.read())


def pcts(values: list[float]) -> str:
    values = sorted(values)
    p = lambda q: values[min(len(values) - 1, int(q * len(values)))]  # noqa: E731
    return f"p50 {p(0.5):.1f} ms, p90 {p(0.9):.1f} ms, max {values[-1]:.1f} ms (n={len(values)})"


def server_pid() -> int:
    pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    found = []
    for pid in pids:
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if len(cmd) > 1 and cmd[0].endswith(b"jobs-host") and cmd[1] == b"mcp":
            found.append(pid)
    return max(found)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


def cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


async def start(conn: Any, command: str, runner: bool) -> str:
    args: dict[str, Any] = {"command": command}
    if runner:
        args["runner"] = "ray"
    result = await conn.call("bash", args)
    text = result.content[0].text
    assert text.startswith("started background job "), text
    return text.removeprefix("started background job ")


async def durable_starts(flags: list[str], n: int) -> None:
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as runtime:
        os.chmod(runtime, 0o700)
        env = {"XDG_RUNTIME_DIR": runtime, "XDG_STATE_HOME": os.path.join(runtime, "state")}
        try:
            async with test_clients.connect(*flags) as plain, test_clients.connect(
                *flags, "--session", "bench", env=env
            ) as durable:
                times: dict[str, list[float]] = {"plain": [], "durable": []}
                for _ in range(n):
                    for name, conn in (("plain", plain), ("durable", durable)):
                        t = time.perf_counter()
                        job = await start(conn, "sleep 30", True)
                        times[name].append((time.perf_counter() - t) * 1000)
                        await conn.call("job_kill", {"job_id": job})
                print(f"start answer, plain session: {pcts(times['plain'])}")
                print(f"start answer, durable session: {pcts(times['durable'])}")
        finally:
            stop = [os.environ["JOBS_HOST_BIN"], "daemon", "--stop"]
            subprocess.run(stop, env={**os.environ, **env}, capture_output=True, check=False)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument(
        "--durable", action="store_true", help="only the start answer in a durable session against a plain one"
    )
    args = parser.parse_args()
    flags = ["--runner", f"ray={RAY}", "--max-jobs-per-owner", str(args.jobs + 10), "--extensions", "runners"]
    print(f"Ray {get('/api/version')['ray_version']} at {RAY}; jobs-host {os.environ['JOBS_HOST_BIN']}")
    if args.durable:
        await durable_starts(flags, args.starts)
        return

    async with test_clients.connect(*flags) as conn:
        # The start answer against the submit's own HTTP time, alternating.
        ours, theirs = [], []
        ids = []
        for i in range(args.starts):
            t = time.perf_counter()
            ids.append(await start(conn, "sleep 30", True))
            ours.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            sid = post("/api/jobs/", {"entrypoint": "sleep 30", "submission_id": f"bench-{time.time_ns()}"})["submission_id"]
            theirs.append((time.perf_counter() - t) * 1000)
            post(f"/api/jobs/{sid}/stop", {})
        for job in ids:
            await conn.call("job_kill", {"job_id": job})
        print(f"start answer: {pcts(ours)}")
        print(f"submit's own HTTP time: {pcts(theirs)}")

        # Output written to readable.
        job = await start(conn, "for i in $(seq 20); do date +%s.%N; sleep 0.5; done", True)
        delays = []
        while len(delays) < 20:
            result = await conn.call("job_output", {"job_id": job})
            now = time.time()
            for line in result.content[-1].text.split("\n"):
                try:
                    delays.append((now - float(line)) * 1000)
                except ValueError:
                    pass
            if "[status: running]" not in result.content[-1].text and len(delays) < 20:
                break
            await asyncio.sleep(0.02)
        print(f"output readable after it was written: {pcts(delays)}")

        # The end's notice against the engine's end time.
        after = []
        for _ in range(5):
            job = await start(conn, "sleep 1", True)
            announced = await conn.notices.wait_for(job)
            seen = time.time() * 1000
            rows = (await conn.call("job_list", {})).content[-1].text
            sid = next(w for w in rows.replace("]", " ").split() if w.startswith("jobshost-") and w.endswith(job))
            end = get(f"/api/jobs/{sid}")["end_time"]
            after.append(seen - end)
            del announced
        print(f"notice after the engine's end time: {pcts(after)}")

    # job_list with N remote jobs against N local ones, RSS and idle CPU.
    for runner in (False, True):
        async with test_clients.connect(*flags) as conn:
            pid = server_pid()
            await conn.call("job_list", {})
            before = rss_kb(pid)
            jobs = [await start(conn, "sleep 600", runner) for _ in range(args.jobs)]
            # Until every remote job runs (its placement names no queue).
            for _ in range(600):
                rows = (await conn.call("job_list", {})).content[-1].text
                if "pending" not in rows and "submitting" not in rows:
                    break
                await asyncio.sleep(1)
            times = []
            for _ in range(20):
                t = time.perf_counter()
                await conn.call("job_list", {})
                times.append((time.perf_counter() - t) * 1000)
            grown = rss_kb(pid) - before
            ticks = cpu_ticks(pid)
            await asyncio.sleep(20)
            cpu = (cpu_ticks(pid) - ticks) / os.sysconf("SC_CLK_TCK") / 20 * 100
            kind = "remote" if runner else "local"
            print(
                f"{args.jobs} {kind} jobs: job_list median {statistics.median(times):.2f} ms; "
                f"host RSS +{grown} KB ({grown / args.jobs:.1f} KB a job); host CPU while idle {cpu:.2f}% of a core"
            )
            for job in jobs:
                await conn.call("job_kill", {"job_id": job})


asyncio.run(main())
