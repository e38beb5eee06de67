"""How a Spark write's rows get their buckets: the table's bucket scheme, chosen once.

Both run stage A where the rows are (the DataFrame's own partitions) and one shuffle by
(partition, bucket) brings each file group's rows to one task for stage B (``tag_and_write``):

* :class:`AssignerScheme` (the dynamic scheme): a fleet of slot actors, kept across writes,
  tags each row in stage A; a task sends each slot's rows to that slot's actor (slot =
  ``pmod(key hash, N)``), so no shuffle is needed to route them; every slot may fill every
  bucket (``actors/allocator.py``).
* :class:`LayoutScheme` (simple bucket, consistent hashing): stage A computes each row's
  bucket from the layouts of the instant the write builds on (no actor).
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any, Protocol

from dynbucket.actors.fleet import AssignerFleet
from dynbucket.actors.link import RayLink
from dynbucket.base.columns import BUCKET, HASH, OP, PARTITION
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.table.context import Operation, TableRef, WriteContext
from dynbucket.write.assign_stage import ArrowFn, assign_fn, record_check, tagged_schema
from dynbucket.write.caches import CacheMatch
from dynbucket.write.index_source import RLIIndexSource
from dynbucket.write.instant import Assigners, InstantWrite, NoAssigners
from dynbucket.write.locate_stage import locate_fn
from dynbucket.write.write_stage import WRITTEN, carry_errors, write_fn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


class Scheme(Protocol):
    """What a Spark write asks of its bucket scheme."""

    def assigners(self, num_slots: int, last_write: str | None) -> Assigners: ...

    def stage_a(self, w: InstantWrite, op: Operation) -> ArrowFn: ...

    def index_slots(self, num_slots: int) -> int: ...

    def metadata(self, num_slots: int, shuffles: int) -> dict[str, Any]: ...

    def close(self) -> None: ...


class AssignerScheme:
    """The dynamic scheme's Spark side: owns the table's fleet of slot actors."""

    def __init__(self, table: TableRef, link: RayLink, caches: CacheMatch) -> None:
        self.table = table
        self.link = link
        self.caches = caches
        self.fleet: AssignerFleet | None = None

    def assigners(self, num_slots: int, last_write: str | None) -> AssignerFleet:
        """The fleet: emptied when another writer committed, replaced when the slot count
        changed or an abort found a slot gone."""
        fleet = self.fleet
        if fleet is not None and fleet.num_slots != num_slots:
            self.close()
        elif fleet is not None and not self.caches.holds(last_write):
            fleet.reset()  # closes the fleet if a slot fails it
            self.caches.emptied(last_write)
        if self.fleet is not None and self.fleet.closed:
            self.close()
        if self.fleet is None:
            spec = self.table.spec
            self.fleet = AssignerFleet(
                self.link,
                spec.table_id[:8],
                num_slots,
                spec.dynamic_options,
                functools.partial(RLIIndexSource, self.table),
                wait=False,
            )
            self.caches.emptied(last_write)
        return self.fleet

    def stage_a(self, w: InstantWrite, op: Operation) -> ArrowFn:
        """Each row checked, its partition path computed, tagged by its slot."""
        assert self.fleet is not None
        spec = self.table.spec
        return assign_fn(
            self.link,
            self.fleet.names,
            int(w.id),
            prepare=record_check(spec, op.deletes),
            method=op.assigner_call,
            refuse_known=spec.record_key if op.refuses_known else (),
        )

    def index_slots(self, num_slots: int) -> int:
        return num_slots

    def metadata(self, num_slots: int, shuffles: int) -> dict[str, Any]:
        return {"slots": num_slots, "shuffles": shuffles}

    def close(self) -> None:
        if self.fleet is not None:
            try:
                self.fleet.close()
            finally:
                self.fleet = None


class LayoutScheme:
    """The stateless schemes' Spark side: no actors, the layouts of the write's instant."""

    def __init__(self, table: TableRef) -> None:
        self.table = table

    def assigners(self, num_slots: int, last_write: str | None) -> NoAssigners:
        return NoAssigners()

    def stage_a(self, w: InstantWrite, op: Operation) -> ArrowFn:
        spec = self.table.spec
        layouts = BucketLayouts.load(
            self.table.store, spec.bucket_options, spec.record_key, w.visible
        )
        return locate_fn(layouts, record_check(spec, op.deletes))

    def index_slots(self, num_slots: int) -> int:
        return 1  # no index entries are written

    def metadata(self, num_slots: int, shuffles: int) -> dict[str, Any]:
        return {"shuffles": shuffles}

    def close(self) -> None:
        """Nothing runs between writes."""


def tag_and_write(df: DataFrame, stage_a: ArrowFn, ctx: WriteContext) -> tuple[DataFrame, int]:
    """The Spark job of a write: keys hashed (``xxhash64``), stage A where the rows are, one
    shuffle by (partition, bucket), stage B; with its number of shuffles."""
    from pyspark.sql import functions as F

    hashed = df.withColumn(HASH, F.xxhash64(*ctx.spec.record_key))
    tagged_struct = with_fields(hashed.schema, [(PARTITION, "string"), (OP, "tinyint")])
    tagged = hashed.mapInArrow(carry_errors(stage_a), tagged_schema(tagged_struct))
    stage_b = write_fn(ctx)
    return tagged.repartition(PARTITION, BUCKET).mapInArrow(carry_errors(stage_b), WRITTEN), 1


def with_fields(schema: Any, extra: list[tuple[str, str]]) -> Any:
    """A Spark schema plus the non-null fields ``extra`` (name, DDL type)."""
    from pyspark.sql.types import StructType, _parse_datatype_string

    out = StructType(list(schema.fields))
    for name, ddl in extra:
        out = out.add(name, _parse_datatype_string(ddl), nullable=False)
    return out
