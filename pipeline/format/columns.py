"""Names of the columns dynbucket adds to records, files and reads.

The four the assigner reads and adds are defined with it (``dynbucket.actors.columns``); the
format adds its own. A table's own fields may not use any of these names.
"""

from dynbucket.actors.columns import BUCKET, HASH, IS_NEW, PARTITION

INSTANT = "_instant"
"""The instant that last wrote the row (in data files and reads)."""
OP = "_op"
"""What a delta-file row does: :data:`UPSERT` or :data:`DELETE` (int8)."""
FILE_ID = "_file_id"
"""The row's file group (in index files and reads)."""
SEQ = "_seq"
"""Position of a record in its batch or commit order, while merging."""

RESERVED = frozenset({HASH, INSTANT, OP, PARTITION, BUCKET, FILE_ID, IS_NEW, SEQ})

#: ``_op`` values in delta files.
UPSERT, DELETE = 0, 1

__all__ = [
    "BUCKET", "DELETE", "FILE_ID", "HASH", "INSTANT", "IS_NEW", "OP", "PARTITION", "RESERVED",
    "SEQ", "UPSERT",
]  # fmt: skip
