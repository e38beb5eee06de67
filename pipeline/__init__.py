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

from dynbucket.base.errors import (
    AdoptionRefusedError,
    AssignerError,
    AssignerRestartedError,
    BucketSpaceExhaustedError,
    CommitFailedError,
    ConcurrentWriteError,
    ConfigError,
    DynBucketError,
    ForeignFileGroupError,
    FormatError,
    InstantNotFoundError,
    InvalidInputError,
    InvalidPartitionValueError,
    JavaNotFoundError,
    NotAdoptedError,
    NotATableError,
    NullKeyError,
    RuntimeSetupError,
    SchemaMismatchError,
    TableClosedError,
    TableCorruptedError,
    TableError,
    TableExistsError,
    UnsupportedStorageError,
    UnsupportedTableVersionError,
    WriteConflictError,
)
from dynbucket.format.health.check import CheckReport
from dynbucket.format.read.snapshot import Snapshot
from dynbucket.format.services.service import ServiceResult
from dynbucket.options import (
    ConsistentHashingIndex,
    DynamicBucketIndex,
    DynamicBucketOptions,
    IndexOptions,
    RegroupResult,
    SimpleBucketIndex,
    TableOptions,
)
from dynbucket.runtime import Runtime, RuntimeConfig
from dynbucket.table import Table
from dynbucket.write.results import WriteResult

__all__ = [
    "AdoptionRefusedError", "AssignerError", "AssignerRestartedError",
    "BucketSpaceExhaustedError", "CheckReport", "CommitFailedError", "ConcurrentWriteError",
    "ConfigError", "ConsistentHashingIndex", "DynBucketError", "DynamicBucketIndex",
    "DynamicBucketOptions", "ForeignFileGroupError", "FormatError", "IndexOptions",
    "InstantNotFoundError", "InvalidInputError", "InvalidPartitionValueError",
    "JavaNotFoundError", "NotATableError", "NotAdoptedError", "NullKeyError",
    "RegroupResult", "Runtime", "RuntimeConfig", "RuntimeSetupError", "SchemaMismatchError",
    "ServiceResult", "Snapshot", "SimpleBucketIndex", "Table", "TableClosedError",
    "TableCorruptedError", "TableError", "TableExistsError", "TableOptions",
    "UnsupportedStorageError", "UnsupportedTableVersionError", "WriteConflictError",
    "WriteResult",
]  # fmt: skip
