"""dynbucket's public API: tables, their options, the runtime, and the errors.

Rooms below this one (docs/design.md, "Layers"): ``write/`` runs writes (in process, or
Spark -> assigner actors -> Spark); ``format/`` is the table on storage (pyarrow and numpy)
and ``dynbucket.actors`` the assigner, side by side; ``base/`` is what every room uses
(errors, option persistence, key hashing, column names). Heavy modules (Ray, Spark) load on
first use, so that importing this package stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_ERRORS = "dynbucket.base.errors"
_LAZY = {
    "Runtime": "dynbucket.runtime",
    "RuntimeConfig": "dynbucket.runtime",
    "Table": "dynbucket.table",
    "DynamicBucketIndex": "dynbucket.options",
    "SimpleBucketIndex": "dynbucket.options",
    "ConsistentHashingIndex": "dynbucket.options",
    "RegroupResult": "dynbucket.options",
    "TableOptions": "dynbucket.options",
    "WriteResult": "dynbucket.write.results",
    **{
        name: _ERRORS
        for name in (
            "DynBucketError", "ConfigError", "InvalidInputError", "SchemaMismatchError",
            "TableError", "NotATableError", "TableExistsError", "TableCorruptedError",
            "InstantNotFoundError", "ConcurrentWriteError", "CommitFailedError",
            "UnsupportedStorageError", "NotAdoptedError", "UnsupportedTableVersionError",
            "AdoptionRefusedError", "ForeignFileGroupError",
            "RuntimeSetupError", "AssignerError",
        )
    },
}  # fmt: skip


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dynbucket' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)


__all__ = sorted(_LAZY)
