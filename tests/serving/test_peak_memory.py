"""benchmarks.peak_memory: the sum over a command's whole process tree, and the test running at its peak."""

from __future__ import annotations

import csv
import shlex
import sys
import textwrap

from benchmarks.peak_memory import main, measure

MIB = 1 << 20

# A parent holding 100 MiB starts a child holding 100 MiB, which starts a grandchild holding 200 MiB;
# all three hold theirs while the grandchild sleeps. Written bytes, so every page is resident.
HOLD = "b = b'x' * ({mib} << 20)"
NESTED = textwrap.dedent(f"""
    import subprocess, sys, time
    {HOLD.format(mib=100)}
    grandchild = "{HOLD.format(mib=200)}; import time; time.sleep(1.5)"
    child = "{HOLD.format(mib=100)}; import subprocess, sys; subprocess.run([sys.executable, '-c', %r])" % grandchild
    subprocess.run([sys.executable, "-c", child], check=True)
""")


def test_the_peak_sums_every_process_the_command_starts_once():
    result = measure([sys.executable, "-c", NESTED], interval=0.1)
    assert result.returncode == 0
    peak = result.peak
    # 400 MiB held together, plus three interpreters (~10 MiB each); counted twice it would pass 800.
    assert 400 <= peak.total_mib < 520, peak
    assert len(peak.processes) == 3
    largest_pid, largest_mib, largest_command = peak.processes[0]
    assert 200 <= largest_mib < 240 and "200 << 20" in largest_command
    assert abs(sum(mib for _, mib, _ in peak.processes) - peak.total_mib) < 1


def test_the_peak_of_a_pytest_run_started_by_a_script_names_the_test_running_then(tmp_path):
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "test_three.py").write_text(textwrap.dedent("""
        import time

        def test_small():
            time.sleep(1.0)

        def test_big():
            b = b"x" * (300 << 20)
            time.sleep(1.0)

        def test_after():
            time.sleep(1.0)
    """))
    timeline = tmp_path / "timeline.csv"
    script = shlex.join([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path)])
    result = measure(["sh", "-c", f"true && {script}"], 0.1, timeline)
    assert result.returncode == 0
    assert result.test_at_peak is not None and result.test_at_peak.endswith("test_three.py::test_big")
    assert result.peak.total_mib >= 300
    rows = list(csv.DictReader(timeline.open()))
    assert {row["test"].rpartition("::")[2] for row in rows} >= {"test_small", "test_big", "test_after"}
    big = [float(row["total_mib"]) for row in rows if row["test"].endswith("::test_big")]
    small = [float(row["total_mib"]) for row in rows if row["test"].endswith("::test_small")]
    assert max(big) >= 300 > max(small) + 200


def test_a_peak_over_the_limit_fails_the_command(capsys):
    command = [sys.executable, "-c", HOLD.format(mib=200) + "; import time; time.sleep(0.5)"]
    assert main(["--interval", "0.1", "--limit-mib", "150", "--", *command]) == 1
    out = capsys.readouterr().out
    assert "over the limit of 150 MiB" in out and "peak: 2" in out
    assert main(["--interval", "0.1", "--limit-mib", "400", "--", *command]) == 0


def test_pages_a_forked_child_shares_with_its_parent_count_once():
    """A fork shares its parent's 200 MiB until either writes: the tree holds 200 MiB, not 400."""
    command = f"import os, time\n{HOLD.format(mib=200)}\nif os.fork() == 0:\n    time.sleep(1.5)\n    os._exit(0)\nos.wait()"
    result = measure([sys.executable, "-c", command], interval=0.1)
    assert result.returncode == 0 and len(result.peak.processes) == 2
    assert 200 <= result.peak.total_mib < 260, result.peak


def test_the_tests_that_use_the_launched_app_run_before_the_others(request):
    """The default run's peak memory stays down when the app (and Chromium beside it) is gone before
    the test process loads its own engines and models: this session's order, whatever its selection."""
    uses_app = ["app_server" in item.fixturenames for item in request.session.items]
    assert uses_app == sorted(uses_app, reverse=True)
