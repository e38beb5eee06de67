"""Finding processes a command started, by an environment marker all its children inherit."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Sequence

import psutil

WATCHED = ("java", "raylet", "gcs_server", "ray::", "default_worker", "plasma", "dashboard")


def tool(name: str) -> str:
    """A command installed with this interpreter (its venv's bin, which may not be on PATH)."""
    path = os.path.join(os.path.dirname(sys.executable), name)
    assert os.access(path, os.X_OK), f"{name} is not installed next to {sys.executable}"
    return path


def marked_env(extra: dict[str, str] | None = None) -> tuple[dict[str, str], str]:
    marker = uuid.uuid4().hex
    env = dict(os.environ, DYNBUCKET_TEST_MARKER=marker, **(extra or {}))
    return env, marker


def processes_with_marker(marker: str) -> list[str]:
    """Live (not zombie) processes carrying ``marker``, as 'pid name cmdline'."""
    found = []
    for p in psutil.process_iter(["pid", "name", "cmdline", "status"]):
        try:
            if p.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            if p.environ().get("DYNBUCKET_TEST_MARKER") == marker:
                cmd = " ".join(p.info["cmdline"] or [])[:120]
                found.append(f"{p.info['pid']} {p.info['name']} {cmd}")
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def watched(lines: Sequence[str]) -> list[str]:
    return [line for line in lines if any(w in line for w in WATCHED)]


def wait_until_gone(marker: str, seconds: float = 30.0) -> list[str]:
    """Leftover processes of the marker after up to ``seconds`` (Ray tears down async)."""
    deadline = time.monotonic() + seconds
    left = processes_with_marker(marker)
    while left and time.monotonic() < deadline:
        time.sleep(0.5)
        left = processes_with_marker(marker)
    return left


def run(
    cmd: Sequence[str], env: dict[str, str], timeout: float = 900
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False
    )
