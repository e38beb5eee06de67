"""dynbucket's public API: tables, their options, the runtime, what calls return, and the
errors.

Rooms below this one (docs/design.md, "Layers"): ``write/`` runs writes (in process, or
Spark -> assigner actors -> Spark) and the table services; ``format/`` is the table on
storage (pyarrow and numpy) and ``dynbucket.actors`` the assigner, side by side; ``base/``
is what every room uses (errors, option persistence, key hashing, where work runs beside
its caller). ``import dynbucket`` loads neither Spark nor Ray: they load when a
``Runtime`` starts or a Spark DataFrame is written.
"""

from __future__ import annotations

from importlib import metadata as _metadata
from typing import TYPE_CHECKING, Any

from dynbucket.base.errors import (
    AdoptionRefusedError,
    AssignerError,
    AssignerRestartedError,
    BucketSpaceExhaustedError,
    CommitFailedError,
    CommitStateUnknownError,
    ConcurrentWriteError,
    ConfigError,
    DataFileMissingError,
    DynBucketError,
    ForeignFileGroupError,
    FormatError,
    IncompleteRangeError,
    InstantNotFoundError,
    InvalidInputError,
    InvalidPartitionValueError,
    JavaNotFoundError,
    NotAdoptedError,
    NotATableError,
    NullKeyError,
    PublishPendingError,
    RuntimeSetupError,
    SchemaMismatchError,
    StorageError,
    TableClosedError,
    TableCorruptedError,
    TableError,
    TableExistsError,
    UnsupportedStorageError,
    UnsupportedTableVersionError,
    WriteConflictError,
)

try:
    __version__ = _metadata.version("dynbucket")
except _metadata.PackageNotFoundError:  # the source tree on sys.path, not installed
    __version__ = "0+unknown"

if TYPE_CHECKING:
    from dynbucket.format.health.check import CheckReport
    from dynbucket.format.read.snapshot import Snapshot
    from dynbucket.format.services.service import ServiceResult
    from dynbucket.options import (
        ConsistentHashingIndex,
        DynamicBucketIndex,
        IndexOptions,
        RegroupResult,
        SimpleBucketIndex,
        TableOptions,
    )
    from dynbucket.runtime import Runtime, RuntimeConfig
    from dynbucket.table import Table
    from dynbucket.write.results import WriteResult

#: Where each name of the API lives, loaded on first use: a process that imports one room
#: (an assigner actor imports ``dynbucket.actors``, a Spark task the write stages) does not
#: pay for the others (the whole API takes about 1.5 s to import).
_LAZY = {
    "CheckReport": "dynbucket.format.health.check",
    "Snapshot": "dynbucket.format.read.snapshot",
    "ServiceResult": "dynbucket.format.services.service",
    "ConsistentHashingIndex": "dynbucket.options",
    "DynamicBucketIndex": "dynbucket.options",
    "DynamicBucketOptions": "dynbucket.options",  # the old name, deprecated
    "IndexOptions": "dynbucket.options",
    "RegroupResult": "dynbucket.options",
    "SimpleBucketIndex": "dynbucket.options",
    "TableOptions": "dynbucket.options",
    "Runtime": "dynbucket.runtime",
    "RuntimeConfig": "dynbucket.runtime",
    "Table": "dynbucket.table",
    "WriteResult": "dynbucket.write.results",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'dynbucket' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


__all__ = [
    "AdoptionRefusedError",
    "AssignerError",
    "AssignerRestartedError",
    "BucketSpaceExhaustedError",
    "CheckReport",
    "CommitFailedError",
    "CommitStateUnknownError",
    "ConcurrentWriteError",
    "ConfigError",
    "ConsistentHashingIndex",
    "DataFileMissingError",
    "DynBucketError",
    "DynamicBucketIndex",
    "ForeignFileGroupError",
    "FormatError",
    "IncompleteRangeError",
    "IndexOptions",
    "InstantNotFoundError",
    "InvalidInputError",
    "InvalidPartitionValueError",
    "JavaNotFoundError",
    "NotATableError",
    "NotAdoptedError",
    "NullKeyError",
    "PublishPendingError",
    "RegroupResult",
    "Runtime",
    "RuntimeConfig",
    "RuntimeSetupError",
    "SchemaMismatchError",
    "ServiceResult",
    "Snapshot",
    "SimpleBucketIndex",
    "StorageError",
    "Table",
    "TableClosedError",
    "TableCorruptedError",
    "TableError",
    "TableExistsError",
    "TableOptions",
    "UnsupportedStorageError",
    "UnsupportedTableVersionError",
    "WriteConflictError",
    "WriteResult",
]
