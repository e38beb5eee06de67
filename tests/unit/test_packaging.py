"""What a wheel of dynbucket holds: every package folder of the source tree.

An editable install finds sub-packages by their folder even when ``pyproject.toml`` does not
list them, so a missing entry passes every other test and only breaks a real install.
"""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

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


LIGHT = r"""
import sys
import dynbucket
from dynbucket import Table, Runtime, WriteResult
print(sorted(m for m in ("pyspark", "ray", "raydp") if m in sys.modules))
"""


def test_import_dynbucket_loads_neither_spark_nor_ray() -> None:
    """``import dynbucket`` and ``from dynbucket import Table, Runtime`` stay light: Spark
    and Ray load when a Runtime starts or a DataFrame is written."""
    done = subprocess.run(
        [sys.executable, "-c", LIGHT], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"


ACTOR = r"""
import sys
import dynbucket.actors.actor
print(sorted(m for m in ("dynbucket.table", "dynbucket.format.health.check", "pyspark")
             if m in sys.modules))
"""


def test_an_assigner_actor_imports_only_its_room() -> None:
    """A slot actor's process imports ``dynbucket.actors``, not the whole API (loaded on
    first use: ``dynbucket.__getattr__``), so that actors start in a fraction of the
    1.5 s the API takes to import; every name of the API is still there."""
    done = subprocess.run(
        [sys.executable, "-c", ACTOR], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"
    import dynbucket

    for name in dynbucket.__all__:
        value = getattr(dynbucket, name)
        assert getattr(value, "__name__", name) == name
    with pytest.raises(AttributeError, match="no attribute 'Tabel'"):
        dynbucket.Tabel  # noqa: B018


def _subclasses(cls: type) -> set[type]:
    return {cls} | {s for sub in cls.__subclasses__() for s in _subclasses(sub)}


def test_every_error_and_returned_type_is_exported() -> None:
    import dynbucket
    from dynbucket.base import errors

    names = set(dynbucket.__all__)
    assert set(dir(dynbucket)) >= names
    for error in _subclasses(errors.DynBucketError):
        if not error.__module__.startswith("dynbucket."):
            continue  # a test's own subclass
        assert error.__name__ in names, f"{error.__name__} is not exported by dynbucket"
        assert getattr(dynbucket, error.__name__) is error
    for returned in ("WriteResult", "ServiceResult", "CheckReport", "Snapshot", "RegroupResult"):
        assert returned in names


def test_the_deprecated_import_paths_are_gone() -> None:
    """``dynbucket.pipeline`` and ``dynbucket.actors.errors`` were kept for one release
    (0.1); 0.2 removed them (CHANGELOG.md)."""
    import importlib

    import pytest

    for old in ("dynbucket.pipeline", "dynbucket.actors.errors"):
        with pytest.raises(ModuleNotFoundError):
            importlib.import_module(old)


def test_the_version_is_the_installed_one_and_the_command_says_it() -> None:
    import dynbucket

    assert dynbucket.__version__ == _project()["project"]["version"]
    said = subprocess.run(
        [sys.executable, "-c", "from dynbucket.cli import main; main()", "--version"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert said.stdout.strip() == f"dynbucket {dynbucket.__version__}"


def test_a_folder_named_dynbucket_in_the_working_directory_does_not_shadow_the_install(
    tmp_path: Path,
) -> None:
    """A clone named ``dynbucket/`` beside a user's script has no ``__init__.py`` at its root:
    through a path-finder editable install it would be imported as an empty namespace package
    ("cannot import name 'Table' from 'dynbucket' (unknown location)"). ``make`` installs a
    tree of links instead (setuptools' strict editable mode), found before any namespace."""
    (tmp_path / "dynbucket").symlink_to(ROOT, target_is_directory=True)
    done = subprocess.run(
        [sys.executable, "-c", "from dynbucket import Table; print(Table.__module__)"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "dynbucket.table"


def test_a_module_the_install_lacks_is_linked_before_the_tests_import_it() -> None:
    """The install links each source file (``make`` relinks when the list changes); a test
    run started directly links a module added since (``tests/links.py``)."""
    import importlib.util

    from tests.links import link_new_modules

    spec = importlib.util.find_spec("dynbucket.format.timeline.lanes")
    assert spec is not None and spec.origin is not None
    link = Path(spec.origin)
    if not link.is_symlink():
        pytest.skip("dynbucket is not installed as links to this checkout")
    link.unlink()
    try:
        assert link_new_modules() == [link]
    finally:
        link_new_modules()
    assert link.resolve() == ROOT / "pipeline" / "format" / "timeline" / "lanes.py"
    assert link_new_modules() == []
