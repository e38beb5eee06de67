"""A table's bucket scheme as one object: asked what it does instead of branching on
which scheme a table has.

* :class:`DynamicBuckets` (``DynamicBucketOptions``): assigner slots give new keys
  buckets that are not full; every key's bucket is kept in the record-level index, the
  source of truth (docs/design.md).
* :class:`SimpleBuckets` (``SimpleBucketIndex``, Hudi's bucket index) and
  :class:`ConsistentHashing` (``ConsistentHashingIndex``): a key's bucket is a function of
  the key and its partition's layout (``layouts.py``); no assigner, no index.

Each write path (``write/schemes.py``) and each reader asks the table's scheme
(``TableSpec.scheme``). A new scheme is a subclass here, a line in ``SCHEMES`` and its
options class.
"""

from __future__ import annotations

from abc import ABC
from collections.abc import Collection
from typing import ClassVar

from dynbucket.base.options import DynamicBucketOptions
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.buckets.options import (
    CONSISTENT,
    DYNAMIC,
    SIMPLE,
    ConsistentHashingIndex,
    IndexOptions,
    SimpleBucketIndex,
)
from dynbucket.format.storage.store import TableStore


class BucketScheme(ABC):
    """How a table's keys find their buckets."""

    name: ClassVar[str]
    """The name the scheme is persisted under (``index.engine`` of the table's
    properties)."""
    indexed: ClassVar[bool]
    """Whether a key's bucket is given by the assigner slots and kept in the record-level
    index (a write tags rows through the slots and writes index entries; a lookup reads
    the index), rather than computed from the key and its partition's layout (a write's
    file groups tell which keys are new; a lookup computes the bucket)."""
    adoptable: ClassVar[bool] = True
    """Whether a table Hudi wrote can be adopted with this scheme."""

    def __init__(self, options: IndexOptions) -> None:
        self.options = options

    def layouts(
        self, store: TableStore, key_fields: tuple[str, ...], visible: Collection[str]
    ) -> BucketLayouts | None:
        """Every partition's bucket layout as of the ``visible`` instants (None: the
        scheme has no layouts)."""
        return None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.options!r})"


class DynamicBuckets(BucketScheme):
    name = DYNAMIC
    indexed = True


class _LayoutScheme(BucketScheme):
    indexed = False

    def layouts(
        self, store: TableStore, key_fields: tuple[str, ...], visible: Collection[str]
    ) -> BucketLayouts:
        return BucketLayouts.load(store, self.options, key_fields, visible)


class SimpleBuckets(_LayoutScheme):
    name = SIMPLE


class ConsistentHashing(_LayoutScheme):
    name = CONSISTENT
    adoptable = False  # Hudi's consistent hashing keeps its ring in its own metadata


#: The scheme of each options class.
SCHEMES: dict[type, type[BucketScheme]] = {
    DynamicBucketOptions: DynamicBuckets,
    SimpleBucketIndex: SimpleBuckets,
    ConsistentHashingIndex: ConsistentHashing,
}


def scheme_of(options: IndexOptions) -> BucketScheme:
    """The scheme of a table's index options (a subclass of an options class, such as
    ``DynamicBucketIndex``, is its scheme's)."""
    for cls in type(options).__mro__:
        if cls in SCHEMES:
            return SCHEMES[cls](options)
    raise TypeError(f"no bucket scheme for {type(options).__name__}")
