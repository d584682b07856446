"""Debian packages a test needs, installed with apt-get, one installer at a time.

The suite runs on two pytest-xdist workers (``make test``): the SLURM tests (tests/slurm/local_cluster.py) and the
docs-site test (tests/test_docs_site.py) may both find their packages missing at once, and two apt-gets side by side
fail on dpkg's lock. An exclusive ``flock`` on one file serialises them across processes, and apt itself waits for a
lock another program holds (``DPkg::Lock::Timeout``) instead of failing at once.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import tempfile
from pathlib import Path

LOCK_FILE = Path(tempfile.gettempdir()) / "pgrpo-tests-apt.lock"
WAIT_FOR_DPKG_S = 600


def apt_install(packages: list[str], timeout: float = 900) -> str | None:
    """Run ``apt-get update`` then ``apt-get install`` of ``packages``; None on success, else the failure's text."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    wait = ["-o", f"DPkg::Lock::Timeout={WAIT_FOR_DPKG_S}"]
    with open(LOCK_FILE, "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            for command in (["apt-get", *wait, "update", "-qq"], ["apt-get", *wait, "install", "-y", "-qq", *packages]):
                result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=timeout)
                if result.returncode != 0:
                    return f"{' '.join(command)} failed: {(result.stderr or result.stdout)[-500:]}"
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    return None
