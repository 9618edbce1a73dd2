"""A small file system for disk-full tests: a tmpfs of a chosen size.

``small_filesystem(path, size)`` mounts a tmpfs there (root / CAP_SYS_ADMIN
only: the test is skipped with the reason otherwise) and unmounts it when the
context ends, after the brokers on it stopped (a broker child may still hold
a file a moment: bounded retries, then a lazy unmount). ``remount(path,
size)`` gives it another size (space coming back). Only the mount this
helper made is touched.
"""

from __future__ import annotations

import subprocess
import time
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_filesystem(path: Path, size: str = "1m"):
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0755", "tmpfs", str(path)],
                             capture_output=True, text=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root / CAP_SYS_ADMIN): {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        for _ in range(20):
            if subprocess.run(["umount", str(path)], capture_output=True).returncode == 0:
                break
            time.sleep(0.25)
        else:
            subprocess.run(["umount", "-l", str(path)], capture_output=True)


def remount(path: Path, size: str) -> None:
    subprocess.run(["mount", "-o", f"remount,size={size}", str(path)], check=True)
