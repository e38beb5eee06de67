"""dynbucket's public API: tables, their options, the runtime, and the errors.

Rooms below this one (docs/design.md, "Layers"): ``format/`` is the table on storage
(pyarrow only), ``write/`` runs writes (in process, or Spark -> assigner actors -> Spark),
and ``dynbucket.actors`` is the assigner. Heavy modules (Ray, Spark) load on first use, so
that importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_ERRORS = "dynbucket.actors.errors"
_LAZY = {
    "Runtime": "dynbucket.pipeline.runtime",
    "RuntimeConfig": "dynbucket.pipeline.runtime",
    "Table": "dynbucket.pipeline.table",
    "DynamicBucketIndex": "dynbucket.pipeline.options",
    "SimpleBucketIndex": "dynbucket.pipeline.options",
    "ConsistentHashingIndex": "dynbucket.pipeline.options",
    "RegroupResult": "dynbucket.pipeline.options",
    "TableOptions": "dynbucket.pipeline.options",
    "WriteResult": "dynbucket.pipeline.write.results",
    **{
        name: _ERRORS
        for name in (
            "DynBucketError", "ConfigError", "InvalidInputError", "SchemaMismatchError",
            "TableError", "NotATableError", "TableExistsError", "TableCorruptedError",
            "InstantNotFoundError", "ConcurrentWriteError", "CommitFailedError",
            "UnsupportedStorageError",
            "RuntimeSetupError", "AssignerError",
        )
    },
}  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dynbucket.pipeline' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = sorted(_LAZY)
