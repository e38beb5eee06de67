"""Deprecated: ``dynbucket.pipeline`` is now ``dynbucket`` itself (kept for one release).

``from dynbucket.pipeline import Table`` and ``import dynbucket.pipeline.X`` keep working,
with a :class:`DeprecationWarning`: every name resolves to the module it lives in now, the
same module object (``dynbucket.pipeline.table`` is ``dynbucket.table``), and the format's
modules that moved into rooms by concept resolve to their new rooms
(``dynbucket.pipeline.format.transaction`` is ``dynbucket.format.timeline.transaction``).
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import Any

#: Modules of the old ``pipeline/format/`` that moved to another room.
MOVED = {
    "format.columns": "dynbucket.base.columns",
    "format.keyhash": "dynbucket.base.keyhash",
    "format.table_spec": "dynbucket.format.table.spec",
    "format.options": "dynbucket.format.table.options",
    "format.paths": "dynbucket.format.table.paths",
    "format.reader": "dynbucket.format.read.snapshot",
    "format.check": "dynbucket.format.health.check",
    "format.services": "dynbucket.format.services.clean",
    "format.timeline": "dynbucket.format.timeline.timeline",
    "format.transaction": "dynbucket.format.timeline.transaction",
    "format.lock": "dynbucket.format.timeline.lock",
    "format.outcome": "dynbucket.format.timeline.outcome",
    "format.layout": "dynbucket.format.file_group.slices",
    "format.file_groups": "dynbucket.format.file_group.writer",
    "format.merge": "dynbucket.format.file_group.merge",
    "format.stale": "dynbucket.format.file_group.stale",
    "format.rli": "dynbucket.format.index.rli",
    "format.storage": "dynbucket.format.storage.store",
    "format.object_store": "dynbucket.format.storage.object_store",
    "format.records": "dynbucket.format.records.incoming",
    "format.partitioning": "dynbucket.format.records.partitioning",
}

warnings.warn(
    "dynbucket.pipeline is deprecated and goes in the next release: import from dynbucket "
    "(e.g. `from dynbucket import Table, Runtime, DynamicBucketIndex`)",
    DeprecationWarning,
    stacklevel=2,
)

#: A package with no folder of its own: its submodules come from the finder below.
__path__: list[str] = []


def __getattr__(name: str) -> Any:
    return getattr(importlib.import_module("dynbucket"), name)


def target(name: str) -> str:
    """The module an old ``dynbucket.pipeline.<x>`` name stands for."""
    suffix = name[len(__name__) + 1 :]
    return MOVED.get(suffix, f"dynbucket.{suffix}")


class _Alias(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves ``dynbucket.pipeline.<x>`` to the module it names now."""

    def find_spec(
        self, fullname: str, path: Any = None, target_: Any = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(__name__ + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return importlib.import_module(target(spec.name))

    def exec_module(self, module: ModuleType) -> None:
        """The module it stands for is already executed."""


if not any(isinstance(f, _Alias) for f in sys.meta_path):
    sys.meta_path.insert(0, _Alias())
