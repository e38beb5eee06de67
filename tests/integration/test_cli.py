"""The README's main command, run as a user runs it, leaves no process behind."""

from __future__ import annotations

from pathlib import Path

from tests.integration.processes import marked_env, run, tool, wait_until_gone


def test_demo_streams_prints_layout_saves_png_and_leaves_no_process(tmp_path: Path) -> None:
    env, marker = marked_env()
    png = tmp_path / "layout.png"
    done = run(
        [
            tool("dynbucket"),
            "demo",
            "--path",
            str(tmp_path / "demo"),
            "--batches",
            "3",
            "--rows",
            "3000",
            "--keys-per-bucket",
            "1000",
            "--png",
            str(png),
        ],
        env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "final bucket layout (capacity 1,000 keys per bucket)" in done.stdout
    batch_lines = [line for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert len(batch_lines) >= 3
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    assert wait_until_gone(marker) == []
