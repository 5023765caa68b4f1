"""``python -m export.bench``: runs ``python -m benchmarks.bench`` (same arguments).

The benchmark lives in benchmarks/ with the other measurements; this name stays because issue
28 and earlier notes name the command (``python -m export.bench --streams-only``).
"""

from __future__ import annotations

import sys

from benchmarks.bench import main

if __name__ == "__main__":
    sys.exit(main())
