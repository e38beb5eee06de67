"""The tables Apache Hudi wrote that tests open and adopt (``tests/data/hudi/``, from
apache/hudi-rs: its NOTICE)."""

from __future__ import annotations

import zipfile
from pathlib import Path

DATA = Path(__file__).parent / "data" / "hudi"


def unzipped(name: str, into: Path) -> Path:
    """The table ``<name>.zip`` (a path under ``tests/data/hudi/``) unpacked into ``into``:
    its folder."""
    with zipfile.ZipFile(DATA / f"{name}.zip") as z:
        z.extractall(into)
        (top,) = {n.split("/")[0] for n in z.namelist()} - {"__MACOSX"}
    return into / top


def tree(root: Path) -> dict[str, int]:
    """Every file under ``root``, with its size (to tell that nothing changed)."""
    return {str(p.relative_to(root)): p.stat().st_size for p in root.rglob("*") if p.is_file()}
