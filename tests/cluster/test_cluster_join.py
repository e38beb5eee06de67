"""Runtime joins an existing Ray cluster (RAY_ADDRESS) and leaves the cluster running,
with nothing of its own (driver JVM, Spark executors) left behind."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import time
import uuid
from pathlib import Path

from tests.integration.processes import (
    marked_env,
    processes_with_marker,
    run,
    tool,
    wait_until_gone,
)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_demo_joins_an_existing_cluster_and_leaves_it_running(tmp_path: Path) -> None:
    ray_exe, dynbucket = tool("ray"), tool("dynbucket")
    token = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": uuid.uuid4().hex}
    head_env, head_marker = marked_env(token)
    port = _free_port()
    log = tmp_path / "head.log"
    # `ray start` records itself as this machine's current cluster; a killed head leaves that
    # record behind, and a later plain ray.init() would try to join the dead cluster.
    current = Path("/tmp/ray/ray_current_cluster")
    previous = current.read_text() if current.exists() else None
    with log.open("w") as out:
        head = subprocess.Popen(
            [
                ray_exe,
                "start",
                "--head",
                f"--port={port}",
                "--num-cpus=2",
                "--include-dashboard=false",
                "--block",
            ],
            env=head_env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for_text(head, log, "Ray runtime started", timeout=120)
        driver_env, driver_marker = marked_env({**token, "RAY_ADDRESS": f"127.0.0.1:{port}"})
        done = run(
            [
                dynbucket,
                "demo",
                "--path",
                str(tmp_path / "demo"),
                "--batches",
                "2",
                "--rows",
                "2000",
                "--png",
                "",
            ],
            driver_env,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "final bucket layout" in done.stdout
        assert wait_until_gone(driver_marker) == []
        # Spark's executors ran as Java actors of the head's raylet: they must be gone too,
        # while the cluster itself (raylet, GCS) keeps running.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            left = processes_with_marker(head_marker)
            if not [p for p in left if " java " in f" {p} "]:
                break
            time.sleep(0.5)
        assert not [p for p in left if " java " in f" {p} "], left
        assert [p for p in left if "raylet" in p], "the joined cluster must keep running"
    finally:
        os.killpg(head.pid, signal.SIGTERM)
        head.wait(timeout=60)
        if previous is None:
            current.unlink(missing_ok=True)
        else:
            current.write_text(previous)
    assert wait_until_gone(head_marker, seconds=60) == []


def _wait_for_text(proc: subprocess.Popen[bytes], log: Path, text: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        if text in log.read_text():
            return
        time.sleep(0.5)
    raise AssertionError(f"{text!r} not seen; output:\n{log.read_text()[-2000:]}")
