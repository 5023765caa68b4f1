"""The browser modules' own unit tests, run by ``node --test`` (Node.js 20, nothing to install):
``web/**/test/*.test.mjs``, each folder of tests beside the modules it tests; ``npm test`` in tests/
runs the same command. They check each module's edges on its own; the Python-driven tests check
the modules against the app's Python (the tokenizer against tiktoken, draws against
runtime/draws.py, links and checks against playground/links.py in Chromium). The static edition
leaves the test folders out (tests/browser/test_static_edition.py)."""

from __future__ import annotations

import json
import re
import shlex
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_the_browser_modules_unit_tests_pass():
    """``npm test``'s command, as package.json gives it (run without npm: node is enough)."""
    command = shlex.split(json.loads((ROOT / "tests" / "package.json").read_text())["scripts"]["test"])
    assert command[:2] == ["node", "--test"]
    node = shutil.which("node")
    assert node, "node not found: the browser modules' unit tests need Node.js 20"
    files = sorted(ROOT.glob("web/**/test/*.test.mjs"))
    assert len(files) >= 4, files
    proc = subprocess.run([node, *command[1:]], cwd=ROOT / "tests", capture_output=True, text=True, timeout=300)
    failed = [line for line in proc.stdout.splitlines() if line.startswith("not ok")]
    assert proc.returncode == 0 and not failed, "\n".join(failed) + "\n\n" + proc.stdout[-8000:] + proc.stderr[-2000:]
    # (a file that cannot load is one "not ok"; each of these files holds several tests)
    assert int(re.search(r"^# pass (\d+)$", proc.stdout, re.M).group(1)) > 2 * len(files), proc.stdout[-2000:]
