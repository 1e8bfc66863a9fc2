"""The Slurm runner's budgets, measured against a live cluster (see BENCHMARKS.md).

    SLURM_CONF=... JOBS_HOST_SLURM_DIR=DIR target/venv/bin/python benches/slurm_runner.py [--jobs 100]

Through `jobs-host mcp --runner slurm` and the MCP Python SDK (JOBS_HOST_BIN, by default
target/release/jobs-host), with every Slurm command the host runs counted by a shim on
its PATH:

- the start answer (`started background job`) against `sbatch --parsable`'s own time for
  the same kind of job, alternating;
- how long output a job writes takes to be readable through `job_output` (the job prints
  its own clock; a reader polls every 20 ms);
- the end's notice against the job's own clock just before it exits (the exit record is
  written a few milliseconds later);
- N jobs at once: how many `squeue` calls the host makes in 30 s while they run.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "clients" / "python"))
os.environ.setdefault("JOBS_HOST_BIN", str(ROOT / "target" / "release" / "jobs-host"))
import test_clients  # noqa: E402

SLURM_CONF = os.environ["SLURM_CONF"]
SLURM_DIR = os.environ["JOBS_HOST_SLURM_DIR"]


def pcts(values: list[float]) -> str:
    values = sorted(values)
    p = lambda q: values[min(len(values) - 1, int(q * len(values)))]  # noqa: E731
    return f"p50 {p(0.5):.1f} ms, p90 {p(0.9):.1f} ms, max {values[-1]:.1f} ms (n={len(values)})"


def shims(log: Path) -> Path:
    """A directory of scripts named as Slurm's commands that log each call, then run it."""
    folder = Path(tempfile.mkdtemp(prefix="slurm-shims-"))
    for name in ("sbatch", "squeue", "scontrol", "sacct", "scancel", "sinfo"):
        real = shutil.which(name)
        assert real, name
        script = folder / name
        script.write_text(f'#!/bin/sh\necho {name} >> "{log}"\nexec "{real}" "$@"\n')
        script.chmod(0o755)
    return folder


def clocks(text: str) -> list[float]:
    """The clocks a job printed (`date +%s.%N` lines) in a read."""
    found = []
    for line in text.splitlines():
        try:
            found.append(float(line))
        except ValueError:
            pass
    return found


def calls(log: Path, name: str) -> int:
    if not log.exists():
        return 0
    return sum(1 for line in log.read_text().splitlines() if line == name)


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--starts", type=int, default=20)
    args = parser.parse_args()
    log = Path(tempfile.mkdtemp(prefix="slurm-calls-")) / "calls"
    folder = shims(log)
    env = {"SLURM_CONF": SLURM_CONF, "PATH": f"{folder}:{os.environ['PATH']}"}
    flags = ["--runner", "slurm", "--slurm-dir", SLURM_DIR, "--max-jobs-per-owner", str(args.jobs + 10)]
    async with test_clients.connect(*flags, env=env) as conn:
        starts, sbatches = [], []
        for _ in range(args.starts):
            began = time.perf_counter()
            result = await conn.call("bash", {"command": "true", "runner": "slurm"})
            starts.append((time.perf_counter() - began) * 1000)
            assert not result.is_error, result
            began = time.perf_counter()
            subprocess.run(
                ["sbatch", "--parsable", f"--output={SLURM_DIR}/bench-%j.out", "--wrap", "true"],
                check=True,
                capture_output=True,
                env={**os.environ, "SLURM_CONF": SLURM_CONF},
            )
            sbatches.append((time.perf_counter() - began) * 1000)
        print(f"start answer: {pcts(starts)}")
        print(f"sbatch --parsable alone: {pcts(sbatches)}")

        readable, notices = [], []
        for _ in range(5):
            result = await conn.call(
                "bash", {"command": "sleep 2; date +%s.%N; sleep 2; date +%s.%N; exit 0", "runner": "slurm"}
            )
            job = result.content[0].text.removeprefix("started background job ")
            seen: list[float] = []
            while not seen:
                read = await conn.call("job_output", {"job_id": job})
                seen = clocks(read.content[-1].text)
                if not seen:
                    await asyncio.sleep(0.02)
            now = time.time()
            written = seen[0]
            readable.append((now - written) * 1000)
            await conn.notices.wait_for(job)
            arrived = time.time()
            last = await conn.call("job_output", {"job_id": job})
            notices.append((arrived - clocks(last.content[-1].text)[-1]) * 1000)
        print(f"output readable after written: {pcts(readable)}")
        print(f"notice after the job's last clock: {pcts(notices)}")

        before = calls(log, "squeue")
        for _ in range(args.jobs):
            result = await conn.call("bash", {"command": "sleep 300", "runner": "slurm"})
            assert not result.is_error, result
        began = calls(log, "squeue")
        await asyncio.sleep(30)
        during = calls(log, "squeue") - began
        listed = await conn.call("job_list", {})
        running = listed.content[-1].text.count(" running ")
        print(
            f"{args.jobs} jobs ({running} running): {during} squeue calls in 30 s "
            f"({began - before} while they were started), scontrol {calls(log, 'scontrol')}, "
            f"sacct {calls(log, 'sacct')} in the whole run"
        )
    shutil.rmtree(folder)
    print(f"median start answer over sbatch's own time: {statistics.median(starts) / statistics.median(sbatches):.2f}x")


if __name__ == "__main__":
    asyncio.run(main())
