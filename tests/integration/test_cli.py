"""The README's main command, run as a user runs it, leaves no process behind."""

from __future__ import annotations

from tests.integration.processes import marked_env, run, tool, wait_until_gone


def test_demo_prints_the_round_trip_and_leaves_no_process() -> None:
    env, marker = marked_env()
    done = run([tool("dynbucket"), "demo", "--rows", "20000"], env)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "20000 came back tagged" in done.stdout
    assert wait_until_gone(marker) == []
