"""The docs: the site builds with no warning (``make docs``: mkdocs, the API reference
rendered from the docstrings, every public name in it), and every Python block of the
README and the docs runs, or says why it cannot here (``<!-- not run: why -->`` on the
line before it: it needs Spark, a cluster, S3 or input files)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import dynbucket

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
_NOT_RUN = re.compile(r"<!-- not run: (.+?) -->\s*$")


def _blocks() -> list[tuple[str, str, str | None]]:
    """Every Python block: (where, code, why it is not run or None)."""
    found = []
    for page in PAGES:
        text = page.read_text()
        for m in _BLOCK.finditer(text):
            line = text.count("\n", 0, m.start()) + 1
            before = text[: m.start()].rstrip("\n").rsplit("\n", 1)[-1]
            why = _NOT_RUN.search(before)
            found.append((f"{page.relative_to(ROOT)}:{line}", m.group(1), why and why.group(1)))
    return found


BLOCKS = _blocks()


def test_the_docs_build_with_no_warning(tmp_path: Path) -> None:
    subprocess.run([sys.executable, "scripts/docs-src"], cwd=ROOT, check=True)
    mkdocs = Path(sys.executable).parent / "mkdocs"
    built = subprocess.run(
        [str(mkdocs), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert built.returncode == 0, built.stderr[-3000:]
    reference = "".join(p.read_text() for p in (ROOT / "docs" / "reference").glob("*.md"))
    missing = [n for n in dynbucket.__all__ if not re.search(rf"\.{n}\b", reference)]
    assert missing == [], "public names the API reference leaves out"


def test_every_block_runs_or_says_why_not() -> None:
    assert len(BLOCKS) >= 10
    assert [w for w, _, why in BLOCKS if why is not None and len(why) < 10] == []


@pytest.mark.parametrize(("where", "code"), [(w, c) for w, c, why in BLOCKS if why is None])
def test_a_python_block_runs(tmp_path: Path, where: str, code: str) -> None:
    ran = subprocess.run(
        [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
    )
    assert ran.returncode == 0, f"{where}:\n{ran.stderr[-3000:]}"


def test_the_benchmarks_page_has_the_latest_run_of_every_bench() -> None:
    """A row a bench in the table of ``docs/benchmarks.md``: its date, the command that made
    it (that very bench) and its figures; a bench added without a row fails here."""
    import argparse

    from dynbucket.cli.commands import parser

    top = next(a for a in parser()._actions if isinstance(a, argparse._SubParsersAction))
    bench = top.choices["bench"]
    sub = next(a for a in bench._actions if isinstance(a, argparse._SubParsersAction))
    benches = {name for name, p in sub.choices.items() if p.prog.endswith(f" {name}")}
    page = (ROOT / "docs" / "benchmarks.md").read_text()
    rows = {
        m.group(1): m.group(0)
        for m in re.finditer(
            r"^\| `(\w+)` \| (\d{4}-\d\d-\d\d) \| `dynbucket bench (\w+).*$", page, re.M
        )
        if m.group(1) == m.group(3)
    }
    assert sorted(benches - set(rows)) == [], "benches with no row of their latest run"
    assert sorted(set(rows) - benches) == [], "rows of benches that do not exist"


_CITED = re.compile(r"`([\w/.\-]+?\.py)(?:::[^`]*)?`")
#: A placeholder the design's note on the tests' layout uses.
_PLACEHOLDERS = {"tests/unit/actors/test_x.py"}


def test_every_module_and_test_a_doc_or_docstring_cites_exists() -> None:
    """A module or test named in the docs, the changelog or a docstring (``a/b.py``: any
    path ending so; ``b.py``: any file of that name) is there: a move updates its
    citations (the design's invariant table cites the tests that check each)."""
    files = [
        p.relative_to(ROOT).as_posix()
        for top in ("pipeline", "actors", "tests", "scripts", "examples", "docs")
        for p in (ROOT / top).rglob("*.py")
    ]
    names = {f.rsplit("/", 1)[-1] for f in files}
    citing = [*PAGES, ROOT / "CHANGELOG.md", *(ROOT / "pipeline").rglob("*.py")]
    citing += [*(ROOT / "actors").rglob("*.py")]
    missing = []
    for page in citing:
        for cited in set(_CITED.findall(page.read_text())) - _PLACEHOLDERS:
            found = (
                any(f == cited or f.endswith("/" + cited) for f in files)
                if "/" in cited
                else cited in names
            )
            if not found:
                missing.append(f"{page.relative_to(ROOT)}: {cited}")
    assert missing == []
