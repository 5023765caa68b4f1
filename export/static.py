"""``python -m export.static``: the command by its first name, as earlier docs and scripts give it. The
edition itself is deploy/static.py (``python -m deploy.static``), above the app whose logic it packages;
this runs that module by name and imports nothing of it (nothing in export/ reaches up)."""

import runpy

if __name__ == "__main__":
    runpy.run_module("deploy.static", run_name="__main__", alter_sys=True)
