"""How a write's rows get their buckets: the write side of the table's bucket scheme
(``format/buckets/scheme.py``), chosen once per writer: :func:`spark_scheme` (a
:class:`SparkScheme`) or :func:`local_scheme` (a :class:`LocalScheme`).

A Spark write runs stage A where the rows are (the DataFrame's own partitions) and one
shuffle by (partition, bucket) brings each file group's rows to one task for stage B
(``engines.tag_and_write``); a write in this process tags its rows with ``tag``:

* :class:`AssignerScheme` (the dynamic scheme): a fleet of slot actors, kept across writes,
  tags each row in stage A; a task sends each slot's rows to that slot's actor (slot =
  ``pmod(key hash, N)``), so no shuffle is needed to route them; every slot may fill every
  bucket (``actors/allocator.py``).
* :class:`InProcessSlots` (the dynamic scheme in this process): the slot actor's own
  plain class, one object per slot, each row on the slot Spark routes it to;
* :class:`LayoutScheme` (simple bucket, consistent hashing), both sides: stage A computes
  each row's bucket from the layouts of the instant the write builds on (no actor).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Protocol

import pyarrow as pa

from dynbucket.actors.actor import AssignerActor
from dynbucket.actors.allocator import ALONE, Lane
from dynbucket.actors.assigner import NO_CHECKPOINT, BucketAssigner, NewKeys
from dynbucket.actors.checkpoints import Assigners, Gone, NoAssigners, by_slot
from dynbucket.actors.fleet import AssignerFleet
from dynbucket.actors.global_assigner import GlobalBucketAssigner
from dynbucket.actors.link import RayLink
from dynbucket.base.columns import (
    BUCKET,
    HASH,
    IS_NEW,
    PARTITION,
    partition_codes,
)
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.buckets.scheme import (
    BucketScheme,
    DynamicBuckets,
    GlobalDynamicBuckets,
    LayoutBuckets,
)
from dynbucket.format.records.incoming import refuse_known
from dynbucket.format.table.context import Operation, TableRef
from dynbucket.format.table.spec import TableSpec
from dynbucket.write.assign_stage import ArrowFn, assign_fn, record_check
from dynbucket.write.index_source import index_source
from dynbucket.write.instant import InstantWrite
from dynbucket.write.locate_stage import locate_fn, with_buckets
from dynbucket.write.moves import one_per_key, with_move_outs
from dynbucket.write.writer import CacheMatch


class _Assigned(Protocol):
    """What every write asks of its bucket scheme, on either side."""

    def assigners(
        self, num_slots: int, last_write: str | None, latest: int = NO_CHECKPOINT
    ) -> Assigners:
        """The write's assigners, their caches matching ``last_write`` (the completed data
        writes it builds on; ``latest``: its latest successful checkpoint)."""
        ...

    def close(self) -> None:
        """Stops what the scheme keeps between writes (a fleet's actors, slots)."""
        ...


class SparkScheme(_Assigned, Protocol):
    """The scheme's Spark side: stage A runs where a DataFrame's rows are."""

    @property
    def fleet(self) -> AssignerFleet | None:
        """The slot actors kept across writes (None: none started, or none needed)."""
        ...

    def stage_a(self, w: InstantWrite, op: Operation, kept: Sequence[str] = ()) -> ArrowFn:
        """A Spark write's stage A: the function run where the rows are (``kept``: the
        fields a partial upsert's records lack)."""
        ...

    def index_slots(self, num_slots: int) -> int:
        """The slots a write's index entries are split by (one: no entries)."""
        ...

    def metadata(self, num_slots: int, shuffles: int) -> dict[str, Any]:
        """What the commit records of how the write ran."""
        ...


class LocalScheme(_Assigned, Protocol):
    """The scheme's in-process side: rows tagged in this process."""

    def tag(self, w: InstantWrite, rows: pa.Table, op: Operation) -> pa.Table:
        """An in-process write's stage A: ``rows`` with ``_bucket`` and ``_is_new``
        (``assigners`` was called for this write)."""
        ...

    def reset(self) -> None:
        """Empties what the scheme cached of the table (it may be of an old view)."""
        ...


class AssignerScheme:
    """The dynamic scheme's Spark side: owns the table's fleet of slot actors."""

    core: type[BucketAssigner] = BucketAssigner
    """The plain assigner the slots adapt."""

    def __init__(self, table: TableRef, link: RayLink, caches: CacheMatch) -> None:
        self.table = table
        self.link = link
        self.caches = caches
        self.fleet: AssignerFleet | None = None

    def assigners(
        self, num_slots: int, last_write: str | None, latest: int = NO_CHECKPOINT
    ) -> AssignerFleet:
        """The fleet: caught up when another writer committed, replaced when the slot count
        changed or an abort found a slot gone."""
        fleet = self.fleet
        if fleet is not None and fleet.num_slots != num_slots:
            self.close()
        elif fleet is not None and not self.caches.holds(last_write):
            fleet.catch_up(latest)  # closes the fleet if a slot fails it
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
                index_source(self.table),
                wait=False,
                core=self.core,
            )
            self.caches.emptied(last_write)
        return self.fleet

    def stage_a(self, w: InstantWrite, op: Operation, kept: Sequence[str] = ()) -> ArrowFn:
        """Each row checked, its partition path computed, tagged by its slot."""
        assert self.fleet is not None
        spec = self.table.spec
        return assign_fn(
            self.link,
            self.fleet.names,
            int(w.id),
            prepare=record_check(spec, op.deletes, op.refuses_known, kept),
            method=op.assigner_call,
            refuse_known=spec.record_key if op.refuses_known else (),
            global_spec=self._moving(spec),
        )

    def _moving(self, spec: TableSpec) -> TableSpec | None:
        """The table whose keys move between partitions (the assign stage then keeps one
        record per key across partitions and deletes a moved key's row); None: keys stay
        in their partition."""
        return None

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


class MovingAssignerScheme(AssignerScheme):
    """The global index's Spark side: a task's records of one key are one, whatever their
    partitions, and a key whose partition changed moves."""

    core = GlobalBucketAssigner

    def _moving(self, spec: TableSpec) -> TableSpec | None:
        return spec


class LayoutScheme:
    """The stateless schemes, on both sides: no actors, the layouts of the write's
    instant."""

    fleet = None

    def __init__(self, table: TableRef) -> None:
        self.table = table

    def assigners(
        self, num_slots: int, last_write: str | None, latest: int = NO_CHECKPOINT
    ) -> NoAssigners:
        return NoAssigners()

    def stage_a(self, w: InstantWrite, op: Operation, kept: Sequence[str] = ()) -> ArrowFn:
        spec = self.table.spec
        check = record_check(spec, op.deletes, op.refuses_known, kept)
        return locate_fn(self._layouts(w), check)

    def tag(self, w: InstantWrite, rows: pa.Table, op: Operation) -> pa.Table:
        layouts = self._layouts(w)
        return pa.Table.from_batches(
            [with_buckets(layouts, b) for b in rows.combine_chunks().to_batches()],
            schema=rows.schema.append(pa.field(BUCKET, pa.int32())).append(
                pa.field(IS_NEW, pa.bool_())
            ),
        )

    def _layouts(self, w: InstantWrite) -> BucketLayouts:
        spec = self.table.spec
        layouts = spec.scheme.layouts(self.table.store, spec.record_key, w.visible)
        assert layouts is not None
        return layouts

    def index_slots(self, num_slots: int) -> int:
        return 1  # no index entries are written

    def metadata(self, num_slots: int, shuffles: int) -> dict[str, Any]:
        return {"shuffles": shuffles}

    def reset(self) -> None:
        """Nothing is cached: each write reads the layouts of its instant."""

    def close(self) -> None:
        """Nothing runs between writes."""


class InProcessSlots:
    """The dynamic scheme in this process: ``num_slots`` slots, each the slot actor's own
    plain class (the same Arrow-in, Arrow-out tagging code as in Ray), each row on slot
    ``pmod(key hash, num_slots)`` as Spark routes it, so that a write gives the buckets a
    Spark write with as many slots gives. New slots for a new count (each bootstraps from
    the index); their caches caught up when another writer committed since (``CacheMatch``)."""

    core: type[BucketAssigner] = BucketAssigner
    """The plain assigner the slots adapt."""

    def __init__(self, table: TableRef, caches: CacheMatch) -> None:
        self.table = table
        self.caches = caches
        self.slots: list[AssignerActor] = []

    def assigners(
        self, num_slots: int, last_write: str | None, latest: int = NO_CHECKPOINT
    ) -> Assigners:
        if len(self.slots) != num_slots:
            source = index_source(self.table)
            opts = self.table.spec.dynamic_options
            self.slots = [
                AssignerActor(i, num_slots, opts, source, self.core) for i in range(num_slots)
            ]
            self.caches.emptied(last_write)
        elif not self.caches.holds(last_write):
            for slot in self.slots:
                slot.catch_up(latest)
            self.caches.emptied(last_write)
        return _Cores([slot.core for slot in self.slots])

    def reset(self) -> None:
        """Empties every slot's cache (what they bootstrapped may be of an old view)."""
        for slot in self.slots:
            slot.reset()

    def tag(self, w: InstantWrite, rows: pa.Table, op: Operation) -> pa.Table:
        out = self._tagged(w, rows, op)
        if op.refuses_known:
            refuse_known(out, self.table.spec.record_key)
        return out

    def _tagged(self, w: InstantWrite, rows: pa.Table, op: Operation) -> pa.Table:
        tagged = [
            getattr(self.slots[i], op.assigner_call)(w.checkpoint, rows_of_slot)
            for i, rows_of_slot in _by_slot(rows, len(self.slots))
        ]
        return pa.Table.from_batches(tagged)

    def close(self) -> None:
        self.slots = []


class MovingInProcessSlots(InProcessSlots):
    """A global index in this process (``moves.py``): one record per key across partitions
    before the slots; after them, each moving key's delete where it was."""

    core = GlobalBucketAssigner

    def _tagged(self, w: InstantWrite, rows: pa.Table, op: Operation) -> pa.Table:
        rows = one_per_key(self.table.spec, rows, op.deletes)
        return with_move_outs(super()._tagged(w, rows, op))


class _Cores:
    """The checkpoint flow of several in-process slots, as one (``checkpoints.Assigners``)."""

    def __init__(self, cores: list[BucketAssigner]) -> None:
        self.cores = cores

    def begin(self, checkpoint: int, latest_successful: int, lanes: Lane = ALONE) -> None:
        for core in self.cores:
            core.begin(checkpoint, latest_successful, lanes)

    def snapshot(
        self, checkpoint: int, latest_successful: int, new_keys: NewKeys | None = None
    ) -> list[str]:
        return [
            p for core in self.cores for p in core.snapshot(checkpoint, latest_successful, new_keys)
        ]

    def abort(self, checkpoint: int) -> int:
        return sum(core.abort(checkpoint) for core in self.cores)

    def leave(self, checkpoint: int, gone: Gone) -> None:
        for slot, batch in by_slot(gone, len(self.cores)).items():
            names, codes = partition_codes(batch.column(PARTITION))
            self.cores[slot].leave(checkpoint, names, codes, batch.column(HASH).to_numpy())


def _by_slot(rows: pa.Table, slots: int) -> list[tuple[int, pa.Table]]:
    """The rows of each slot that has any: slot ``pmod(key hash, slots)``, Spark's routing,
    each slot's rows in their order."""
    if slots == 1:
        return [(0, rows)]
    slot_of = rows.column(HASH).to_numpy() % slots  # numpy's % of a positive divisor: pmod
    shares = [(i, rows.filter(pa.array(slot_of == i))) for i in range(slots)]
    return [(i, share) for i, share in shares if share.num_rows] or [(0, rows)]


#: Each bucket scheme's sides (a scheme not named here takes its parent's).
SIDES: dict[type[BucketScheme], tuple[Callable[..., SparkScheme], Callable[..., LocalScheme]]] = {
    DynamicBuckets: (
        lambda table, caches, link: AssignerScheme(table, link, caches),
        lambda table, caches: InProcessSlots(table, caches),
    ),
    GlobalDynamicBuckets: (
        lambda table, caches, link: MovingAssignerScheme(table, link, caches),
        lambda table, caches: MovingInProcessSlots(table, caches),
    ),
    LayoutBuckets: (
        lambda table, caches, link: LayoutScheme(table),
        lambda table, caches: LayoutScheme(table),
    ),
}


def _sides(table: TableRef) -> tuple[Callable[..., SparkScheme], Callable[..., LocalScheme]]:
    for cls in type(table.spec.scheme).__mro__:
        if cls in SIDES:
            return SIDES[cls]
    raise TypeError(f"no write side for {type(table.spec.scheme).__name__}")


def spark_scheme(table: TableRef, caches: CacheMatch, link: RayLink) -> SparkScheme:
    """The Spark side of the table's bucket scheme: its slot actors on the Ray cluster of
    ``link``, or the layouts of a scheme that computes buckets."""
    return _sides(table)[0](table, caches, link)


def local_scheme(table: TableRef, caches: CacheMatch) -> LocalScheme:
    """The in-process side of the table's bucket scheme: its slots in this process, or
    the layouts of a scheme that computes buckets."""
    return _sides(table)[1](table, caches)
