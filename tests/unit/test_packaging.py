"""What a wheel of dynbucket holds: every package folder of the source tree.

An editable install finds sub-packages by their folder even when ``pyproject.toml`` does not
list them, so a missing entry passes every other test and only breaks a real install.
"""

from __future__ import annotations

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
