"""What a wheel of dynbucket holds: every package folder of the source tree.

An editable install finds sub-packages by their folder even when ``pyproject.toml`` does not
list them, so a missing entry passes every other test and only breaks a real install.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def test_every_package_folder_is_listed_in_pyproject() -> None:
    setuptools = _project()["tool"]["setuptools"]
    folders = {package: ROOT / folder for package, folder in setuptools["package-dir"].items()}
    on_disk = set()
    for package, folder in folders.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            on_disk.add(".".join([package, *rel]))
    listed = set(setuptools["packages"])
    assert sorted(on_disk - listed) == [], "package folders a wheel would leave out"
    assert sorted(listed - on_disk) == [], "listed packages with no folder"


ALIASES = r"""
import warnings
warnings.simplefilter("error", DeprecationWarning)
import dynbucket
from dynbucket import Table, NotATableError
for old in ("dynbucket.pipeline", "dynbucket.actors.errors"):
    try:
        __import__(old)
    except DeprecationWarning as e:
        print("warned", old, "->", str(e).split(":")[1].strip().split(" ")[0])
warnings.simplefilter("ignore", DeprecationWarning)
import dynbucket.pipeline
from dynbucket.pipeline import Table as OldTable
from dynbucket.pipeline.format.transaction import Transaction as OldTransaction
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.actors.errors import NotATableError as OldError
print(OldTable is Table, OldTransaction is Transaction, OldError is NotATableError)
"""


def test_the_old_import_paths_work_for_one_release_with_a_warning() -> None:
    """``dynbucket.pipeline`` (the format's old module names too) and
    ``dynbucket.actors.errors`` are the new modules themselves, and say so once."""
    done = subprocess.run(
        [sys.executable, "-c", ALIASES], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split("\n")[:3] == [
        "warned dynbucket.pipeline -> import",
        "warned dynbucket.actors.errors -> import",
        "True True True",
    ]
