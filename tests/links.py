"""The install's links to the source, made whole before any test imports dynbucket.

``make`` installs dynbucket as a tree of links to the source files (setuptools' strict
editable mode: the Makefile says why), which lacks a module added since. ``make`` relinks
when the list of files changes; a test run started directly (``pytest tests/...``) links
what is missing here instead of failing with a bare ``ModuleNotFoundError``.
"""

from __future__ import annotations

import importlib.util
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def link_new_modules() -> list[Path]:
    """Links every source file the install's tree lacks; returns the links made (none
    when dynbucket is installed some other way: a wheel, another checkout)."""
    spec = importlib.util.find_spec("dynbucket")
    if spec is None or spec.origin is None:
        return []
    tree = Path(spec.origin).parent
    if not tree.is_relative_to(ROOT / "build"):
        return []
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())
    made = []
    for package, folder in project["tool"]["setuptools"]["package-dir"].items():
        inside = tree.joinpath(*package.split(".")[1:])
        for source in (ROOT / folder).rglob("*.py"):
            link = inside / source.relative_to(ROOT / folder)
            if not link.exists():
                link.parent.mkdir(parents=True, exist_ok=True)
                link.unlink(missing_ok=True)  # a link left dangling by a file removed
                link.symlink_to(source)
                made.append(link)
    return made
