"""Imports point down only: base -> (actors | format) -> write -> API (docs/design.md,
"Layers"); the assigner and the format, side by side, never import each other.

Every ``import`` of every module is read from its source (also imports inside functions and
under ``TYPE_CHECKING``), so a lazy import cannot hide an upward edge.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {"actors": "dynbucket.actors", "pipeline": "dynbucket"}

#: Layer of a module: the longest matching prefix wins.
LAYERS = {
    "dynbucket.base": 0,
    "dynbucket.actors": 1,
    "dynbucket.format": 1,
    "dynbucket.write": 2,
    "dynbucket": 3,
}
#: Rooms of one layer that must not import each other.
SIBLINGS = ("dynbucket.actors", "dynbucket.format")
#: The Ray shells of the assigner: the only modules of ``actors`` that may use Ray.
RAY_SHELLS = {"dynbucket.actors.actor", "dynbucket.actors.fleet", "dynbucket.actors.link"}
ENGINES = ("ray", "raydp", "pyspark")


def _modules() -> dict[str, Path]:
    out = {}
    for folder, package in PACKAGES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            rel = path.relative_to(ROOT / folder).with_suffix("")
            parts = [p for p in rel.parts if p != "__init__"]
            out[".".join([package, *parts])] = path
    return out


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _imports(name: str, path: Path) -> list[str]:
    """Absolute names of everything ``path`` imports."""
    tree = ast.parse(path.read_text(), str(path))
    package = name if _is_package(path) else name.rpartition(".")[0]
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            found += [f"{base}.{a.name}" for a in node.names] + [base]
    return found


def _layer(module: str) -> int | None:
    best = None
    for prefix, rank in LAYERS.items():
        if (module == prefix or module.startswith(prefix + ".")) and (
            best is None or len(prefix) > len(best[0])
        ):
            best = (prefix, rank)
    return None if best is None else best[1]


MODULES = _modules()


def _room(module: str) -> str | None:
    return next((r for r in SIBLINGS if module == r or module.startswith(r + ".")), None)


def test_the_tree_has_the_rooms() -> None:
    layers = {_layer(m) for m in MODULES}
    assert layers == {0, 1, 2, 3}
    for room in ("dynbucket.base.", "dynbucket.format.", "dynbucket.write.", "dynbucket.actors."):
        assert any(m.startswith(room) for m in MODULES), room


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module: str) -> None:
    own = _layer(module)
    assert own is not None
    upward = sorted(
        {
            imported
            for imported in _imports(module, MODULES[module])
            if imported.startswith("dynbucket.")
            and (rank := _layer(imported)) is not None
            and rank > own
        }
    )
    assert upward == [], f"{module} (layer {own}) imports from a layer above it: {upward}"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _room(m) is not None))
def test_the_assigner_and_the_format_do_not_import_each_other(module: str) -> None:
    """``actors/`` holds the assigner and its Ray shells only: what both need is in base."""
    own = _room(module)
    across = sorted(
        {
            i
            for i in _imports(module, MODULES[module])
            if (room := _room(i)) is not None and room != own
        }
    )
    assert across == [], f"{module} imports from its sibling room: {across}"


@pytest.mark.parametrize(
    "module",
    sorted(m for m in MODULES if _layer(m) in (0, 1) and m not in RAY_SHELLS),
)
def test_plain_cores_and_the_format_use_no_engine(module: str) -> None:
    engines = sorted(
        {i for i in _imports(module, MODULES[module]) if i.split(".")[0] in ENGINES}
        | {i for i in _imports(module, MODULES[module]) if i in RAY_SHELLS}
    )
    assert engines == [], f"{module} must stay plain Python/pyarrow, imports {engines}"


def test_the_checker_sees_an_upward_import(tmp_path: Path) -> None:
    """The walk finds imports inside functions and relative ones (else the test above could
    pass on anything)."""
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from dynbucket.table import Table\nfrom ..write import spark\n")
    found = _imports("dynbucket.format.probe", probe)
    assert "dynbucket.table.Table" in found
    assert "dynbucket.write.spark" in found
    assert _layer("dynbucket.table") == 3 and _layer("dynbucket.format.x") == 1
    assert _layer("dynbucket.base.errors") == 0 and _room("dynbucket.actors.fleet") is not None
