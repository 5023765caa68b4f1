"""The peak memory of a command and every process it starts: ``python -m benchmarks.peak_memory``.

With no command it runs the default test run (``python -m pytest``), the one whose bound docs/testing.md
sets (4 GB in all). Once an interval it sums the proportional set size (PSS) of the command's
process and all its descendants: the app a test launches, Chromium and its renderers, torchrun's
workers. PSS splits a page shared by several processes between them, so the sum is what the tree
takes from the machine, where resident sizes would count a forked parent's pages twice.

It prints the peak, when it came, each process's share at that moment, and the test that was
running: every pytest the command starts, however deep (CI's script runs two), loads this module
as a plugin (``PYTEST_PLUGINS``) that notes each test's start. Linux only: it reads /proc.

    python -m benchmarks.peak_memory                                  # the default test run
    python -m benchmarks.peak_memory --timeline mem.csv -- python -m pytest tests/serving/test_app_api.py
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

_LOG_ENV = "PEAK_MEMORY_TEST_LOG"  # where the plugin below appends a line with each test's id


def pytest_runtest_logstart(nodeid: str, location) -> None:
    """pytest hook (every pytest under the command loads this module through ``PYTEST_PLUGINS``):
    note each test's start."""
    path = os.environ.get(_LOG_ENV)
    if path:
        with open(path, "a", encoding="utf-8") as log:
            log.write(nodeid + "\n")


def children(pid: int) -> list[int]:
    """The direct children of ``pid``, over all its threads (a thread may be the one that forked)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return found
    for task in tasks:
        try:
            found += [int(c) for c in Path(f"/proc/{pid}/task/{task}/children").read_text().split()]
        except OSError:
            continue
    return found


def tree(root: int) -> list[int]:
    """``root`` and every descendant, parents before children."""
    pids, i = [root], 0
    while i < len(pids):
        pids += [c for c in children(pids[i]) if c not in pids]
        i += 1
    return pids


def pss_mib(pid: int) -> float:
    """The process's proportional set size in MiB; 0 for one that has gone."""
    try:
        for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
            if line.startswith("Pss:"):
                return int(line.split()[1]) / 1024
    except (OSError, ValueError):
        pass
    return 0.0


def command_line(pid: int, width: int = 90) -> str:
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        text = " ".join(" ".join(a.decode(errors="replace").split()) for a in argv if a)
    except OSError:
        text = "?"
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Sample:
    t: float  # seconds since the command started
    total_mib: float
    processes: list[tuple[int, float, str]] = field(default_factory=list)  # (pid, MiB, command), largest first


def sample(root: int, t: float) -> Sample:
    shares = [(pid, pss_mib(pid)) for pid in tree(root)]
    processes = sorted(((pid, mib, command_line(pid)) for pid, mib in shares if mib > 0), key=lambda p: -p[1])
    return Sample(t, sum(mib for _, mib in shares), processes)


class TestLog:
    """The test running now, read from the plugin's log as it grows."""

    def __init__(self, path: Path) -> None:
        self.path, self.offset, self.last = path, 0, None

    def current(self) -> str | None:
        try:
            with self.path.open("rb") as log:
                log.seek(self.offset)
                for line in log:
                    if line.endswith(b"\n"):  # a line still being written is read next time
                        self.last = line[:-1].decode("utf-8", errors="replace")
                        self.offset += len(line)
        except OSError:
            pass
        return self.last


@dataclass
class Result:
    returncode: int
    wall_s: float
    peak: Sample
    samples: int
    test_at_peak: str | None = None


def measure(command: list[str], interval: float = 1.0, timeline: Path | None = None) -> Result:
    """Run ``command``, sampling its process tree every ``interval`` seconds until it exits."""
    if not Path("/proc/self/smaps_rollup").exists():
        raise SystemExit("peak_memory reads /proc/<pid>/smaps_rollup: it runs on Linux (4.14 or later) only")
    env = dict(os.environ)
    with tempfile.TemporaryDirectory() as tmp:
        log = Path(tmp) / "tests.log"
        plugins = [p for p in env.get("PYTEST_PLUGINS", "").split(",") if p]
        env["PYTEST_PLUGINS"] = ",".join(dict.fromkeys([*plugins, "benchmarks.peak_memory"]))
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), env.get("PYTHONPATH")]))
        env[_LOG_ENV] = str(log)
        start = time.monotonic()
        proc = subprocess.Popen(command, env=env)
        tests = TestLog(log)
        peak, peak_test, count = Sample(0.0, 0.0), None, 0
        out = timeline.open("w", newline="") if timeline else None
        rows = csv.writer(out) if out else None
        try:
            if rows:
                rows.writerow(["seconds", "total_mib", "command_mib", "largest_other_mib", "largest_other", "test"])
            while proc.poll() is None:
                now = sample(proc.pid, time.monotonic() - start)
                test = tests.current()
                count += 1
                if now.total_mib > peak.total_mib:
                    peak, peak_test = now, test
                if rows and now.processes:
                    own = next((mib for pid, mib, _ in now.processes if pid == proc.pid), 0.0)
                    other = next(((mib, cmd) for pid, mib, cmd in now.processes if pid != proc.pid), (0.0, ""))
                    rows.writerow([f"{now.t:.1f}", f"{now.total_mib:.0f}", f"{own:.0f}", f"{other[0]:.0f}", other[1], test or ""])
                    out.flush()
                try:
                    proc.wait(timeout=interval)
                except subprocess.TimeoutExpired:
                    pass
        except KeyboardInterrupt:
            proc.terminate()
            proc.wait()
        finally:
            if out:
                out.close()
        wall = time.monotonic() - start
        return Result(proc.returncode, wall, peak, count, peak_test)


def report(result: Result, command: list[str], top: int = 8) -> str:
    p = result.peak
    lines = [
        f"command: {' '.join(command)}",
        f"exit status {result.returncode}, {result.wall_s:.0f} s, {result.samples} samples",
        f"peak: {p.total_mib:,.0f} MiB (PSS of {len(p.processes)} processes) at {p.t:.1f} s",
    ]
    if result.test_at_peak:
        lines.append(f"test running at the peak: {result.test_at_peak}")
    for pid, mib, cmd in p.processes[:top]:
        lines.append(f"  {mib:8,.0f} MiB  {pid:>7}  {cmd}")
    rest = p.processes[top:]
    if rest:
        lines.append(f"  {sum(m for _, m, _ in rest):8,.0f} MiB  in {len(rest)} more processes")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples (default 1)")
    parser.add_argument("--timeline", type=Path, help="write every sample to this CSV file")
    parser.add_argument("--limit-mib", type=float, help="exit 1 when the peak passes this many MiB")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="after --: the command to run (default: python -m pytest)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    command = command or [sys.executable, "-m", "pytest"]
    if args.interval <= 0:
        parser.error("--interval must be a positive number of seconds")
    result = measure(command, args.interval, args.timeline)
    print(report(result, command), flush=True)
    if args.limit_mib is not None and result.peak.total_mib > args.limit_mib:
        print(f"peak {result.peak.total_mib:,.0f} MiB is over the limit of {args.limit_mib:,.0f} MiB")
        return 1
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
