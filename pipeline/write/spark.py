"""Writes of Spark DataFrames: Spark -> slot actors -> Spark, one instant per write.

The instant's skeleton (lease, stream batch already committed, commit, the actors'
checkpoint flow) is ``write/instant.py``'s; this module brings the Spark parts:

1. Check the DataFrame's schema against the table's (before any instant starts), by the same
   rule as in-process writes.
2. The fleet: one actor per slot, kept across writes; emptied (``reset``) when another writer
   committed in between (``caches.CacheMatch``: its caches would be stale), replaced when
   the slot count changes or a slot is lost.
3. Spark: hash keys (``xxhash64``) and route each slot's rows to one task; stage A checks the
   rows, computes partition paths and tags buckets through the slot's actor; a shuffle by
   (partition, bucket); stage B writes each file group once and the index entries.
   When every commit of the table used the current slot count N, bucket ``b`` only holds
   keys of slot ``b mod N`` (slots create ids in their residue class), so the slot's task
   already holds all rows of its file groups: stage B runs in the same task, with no second
   shuffle. Each row is checked (``bucket mod N == hash mod N``); a violation fails the
   attempt with ``SlotLayoutError`` and the write is redone with two shuffles.
4. A dynbucket error raised in a task reaches the driver as itself (``carry_errors``). An
   actor that restarted mid-instant makes the instant run again with a new fleet (twice
   at most; ``WRITE_RETRIES``).

A DataFrame whose plan is at most ``driver_max_bytes`` skips step 3's Spark stages: it is
collected and written in this process, tagged by the same actors (``write/driver.py``); when
it is a bare scan of Parquet files, the driver reads the files itself and no Spark job runs
at all (``write/file_scan.py``).
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

from dynbucket.actors.fleet import AssignerFleet
from dynbucket.actors.link import RayLink
from dynbucket.base.columns import BUCKET, HASH, OP, PARTITION
from dynbucket.base.errors import (
    AssignerRestartedError,
    DynBucketError,
    SlotLayoutError,
    from_wire,
)
from dynbucket.format.buckets.layouts import BucketLayouts
from dynbucket.format.file_group.context import Operation, TableRef, WriteContext
from dynbucket.format.records.incoming import fit_types, required_fields
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.spec import TableSpec
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.format.timeline.transaction import Transaction
from dynbucket.write.assign_stage import ArrowFn, assign_fn, record_check, tagged_schema
from dynbucket.write.caches import CacheMatch
from dynbucket.write.driver import collect_hashed, estimated_bytes, write_in_driver
from dynbucket.write.file_scan import read_scanned
from dynbucket.write.index_source import RLIIndexSource
from dynbucket.write.instant import InstantWrite, NoAssigners, StreamBatch
from dynbucket.write.locate_stage import locate_fn
from dynbucket.write.results import Laps, WriteResult
from dynbucket.write.retry import RetryPolicy
from dynbucket.write.routing import route_column
from dynbucket.write.write_stage import (
    WRITTEN,
    carry_errors,
    from_rows,
    in_slot_task,
    write_fn,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
_ROUTE = "_route"
#: A write's retries per cause: once with two shuffles (unfused, the cause cannot recur),
#: twice with a new fleet.
WRITE_RETRIES = RetryPolicy({SlotLayoutError: 1, AssignerRestartedError: 2})

__all__ = ["SparkWriter", "StreamBatch", "conform_spark"]


class SparkWriter:
    """Writes Spark DataFrames into one table; owns that table's assigner fleet.

    Args:
        store, spec: the table.
        link: the Ray cluster and namespace of the slot actors.
        default_slots: assigner slots of a write that names none (Spark's parallelism).
        driver_max_bytes: DataFrames Spark estimates at most this size are written in this
            process (``write/driver.py``); 0: always by Spark tasks.
    """

    def __init__(
        self,
        store: TableStore,
        spec: TableSpec,
        link: RayLink,
        default_slots: int,
        driver_max_bytes: int = 0,
    ) -> None:
        self.store = store
        self.spec = spec
        self.link = link
        self.default_slots = default_slots
        self.driver_max_bytes = driver_max_bytes
        self.fleet: AssignerFleet | None = None
        self.caches = CacheMatch()
        self._slots_of: dict[str, int | None] = {}

    @functools.cached_property
    def table(self) -> TableRef:
        """The table as Spark tasks and slot actors receive it."""
        return TableRef.of(self.store, self.spec)

    def prestart(self, slots: int | None, latest: str | None) -> None:
        """Starts the fleet of a write with ``slots`` slots now, without waiting for it:
        the actors start while the caller prepares its first write. Their caches are empty,
        so they match the table as of ``latest``; a commit by another writer before the
        first write replaces them as usual."""
        if self.fleet is None and not self.spec.stateless:
            self._fleet_for(slots or self.default_slots, latest)

    def close(self) -> None:
        if self.fleet is not None:
            try:
                self.fleet.close()
            finally:
                self.fleet = None

    def write(
        self,
        df: DataFrame,
        operation: str | Operation,
        slots: int | None = None,
        stream: StreamBatch | None = None,
        file_stream: bool = False,
    ) -> WriteResult:
        """One instant, run again (``WRITE_RETRIES``, each cause on its own budget) when a
        file group spans assigner slots (then with two shuffles) or an assigner actor
        restarted in the middle of it (then with a new fleet). ``file_stream``: ``df`` is a
        micro-batch of a bare Parquet file stream
        (:func:`~dynbucket.write.file_scan.bare_file_stream`)."""
        op = Operation.of(operation)
        fused = [True]

        def attempt() -> WriteResult:
            return self._write(df, op, slots, stream, fused[0], file_stream)

        def before_retry(error: BaseException) -> None:
            if isinstance(error, SlotLayoutError):
                log.warning("a file group spans assigner slots; writing with two shuffles")
                fused[0] = False
            else:
                log.warning("an assigner actor restarted during the write; retrying it")
                self.close()

        return WRITE_RETRIES.run(attempt, before_retry)

    # --- one attempt ---------------------------------------------------------------------

    def _write(
        self,
        df: DataFrame,
        op: Operation,
        slots: int | None,
        stream: StreamBatch | None,
        fused: bool,
        file_stream: bool,
    ) -> WriteResult:
        laps = Laps()
        given = df
        df = conform_spark(df, self.spec, op.deletes)
        num_slots = slots or self.default_slots
        in_driver = self._small(df)
        begin = functools.partial(Transaction.begin, self.store, self.spec, "commit", op.value)
        try:
            with InstantWrite(begin, op.value, stream, laps) as w:
                if w.skipped:
                    return w.skipped_result()
                fleet = None if self.spec.stateless else self._fleet_for(num_slots, w.based_on)
                if in_driver:  # while the actors of a new fleet start
                    batches = read_scanned(given, self.spec, op.deletes, file_stream)
                    if batches is not None:
                        laps.lap("read")
                    else:
                        batches = collect_hashed(df, self.spec.record_key)
                        laps.lap("collect")
                w.open(fleet if fleet is not None else NoAssigners())
                laps.lap("prepare")
                if fleet is not None:
                    stage_a = self._stage_a(fleet, w.id, op)
                else:
                    layouts = BucketLayouts.load(
                        self.store, self.spec.bucket_options, self.spec.record_key, w.visible()
                    )
                    stage_a = locate_fn(layouts, record_check(self.spec, op.deletes))
                ctx = WriteContext(
                    self.table, w.id, w.visible(), op, 1 if fleet is None else num_slots
                )
                if in_driver:
                    written = write_in_driver(batches, stage_a, ctx)
                    laps.lap("driver")
                    shuffles = 0
                elif fleet is None:  # stateless: buckets computed in stage A, one shuffle
                    job = self._stateless_job(df, stage_a, ctx)
                    written = from_rows(job.collect())
                    laps.lap("spark")
                    shuffles = 1
                else:
                    fused = fused and self._one_slot_count(w.txn.timeline, num_slots)
                    job = self._job(df, stage_a, ctx, fused)
                    written = from_rows(job.collect())
                    laps.lap("spark")
                    shuffles = 1 if fused else 2
                meta = (
                    {"shuffles": shuffles}
                    if fleet is None
                    else {"slots": num_slots, "shuffles": shuffles}
                )
                result = w.commit(written, meta)
        except Exception as e:
            mapped = _from_spark(e)
            if mapped is e:
                raise
            raise mapped from e
        self.caches.committed(result.instant)
        return result

    def _small(self, df: DataFrame) -> bool:
        """Whether the write goes through the driver: Spark estimates the DataFrame at most
        ``driver_max_bytes`` (a streaming micro-batch of a file source is sized by its
        files; a source Spark cannot size goes to Spark tasks)."""
        if self.driver_max_bytes <= 0:
            return False
        size = estimated_bytes(df)
        return size is not None and size <= self.driver_max_bytes

    def _stage_a(self, fleet: AssignerFleet, instant: str, op: Operation) -> ArrowFn:
        """Stage A: each row checked, its partition path computed, tagged by its slot."""
        return assign_fn(
            self.link,
            fleet.names,
            int(instant),
            prepare=record_check(self.spec, op.deletes),
            method=op.assigner_call,
            refuse_known=self.spec.record_key if op.refuses_known else (),
        )

    def _job(
        self,
        df: DataFrame,
        stage_a: ArrowFn,
        ctx: WriteContext,
        fused: bool,
    ) -> DataFrame:
        from pyspark.sql import functions as F

        spec, num_slots = self.spec, ctx.index_slots
        hashed = df.withColumn(HASH, F.xxhash64(*spec.record_key))
        routed = (
            hashed.withColumn(_ROUTE, route_column(HASH, num_slots))
            .repartition(num_slots, _ROUTE)
            .drop(_ROUTE)
        )
        stage_b = write_fn(ctx)
        if fused:
            return routed.mapInArrow(
                carry_errors(in_slot_task(stage_a, stage_b, num_slots)), WRITTEN
            )
        tagged_struct = _with_fields(routed.schema, [(PARTITION, "string"), (OP, "tinyint")])
        tagged = routed.mapInArrow(carry_errors(stage_a), tagged_schema(tagged_struct))
        shuffled = tagged.repartition(PARTITION, BUCKET)
        return shuffled.mapInArrow(carry_errors(stage_b), WRITTEN)

    def _stateless_job(self, df: DataFrame, stage_a: ArrowFn, ctx: WriteContext) -> DataFrame:
        """Stage A computes each row's bucket where the row is (no actor, no routing); one
        shuffle by (partition, bucket) brings each file group's rows to one writer task."""
        from pyspark.sql import functions as F

        spec = self.spec
        hashed = df.withColumn(HASH, F.xxhash64(*spec.record_key))
        tagged_struct = _with_fields(hashed.schema, [(PARTITION, "string"), (OP, "tinyint")])
        tagged = hashed.mapInArrow(carry_errors(stage_a), tagged_schema(tagged_struct))
        stage_b = write_fn(ctx)
        return tagged.repartition(PARTITION, BUCKET).mapInArrow(carry_errors(stage_b), WRITTEN)

    def _one_slot_count(self, timeline: Timeline, num_slots: int) -> bool:
        """Whether every completed commit of the table was written with ``num_slots`` slots
        (commits without a slot count, e.g. in-process pyarrow writes, count as other)."""
        for instant in timeline.completed("commit"):
            if instant.id not in self._slots_of:
                self._slots_of[instant.id] = timeline.metadata(instant).get("slots")
            if self._slots_of[instant.id] != num_slots:
                return False
        return True

    def _fleet_for(self, num_slots: int, based_on: str | None) -> AssignerFleet:
        """The fleet: emptied when another writer committed, replaced when the slot count
        changed or an abort found a slot gone."""
        fleet = self.fleet
        if fleet is not None and fleet.num_slots != num_slots:
            self.close()
        elif fleet is not None and not self.caches.holds(based_on):
            fleet.reset()  # closes the fleet if a slot fails it
            self.caches.emptied(based_on)
        if self.fleet is not None and self.fleet.closed:
            self.close()
        if self.fleet is None:
            source = functools.partial(RLIIndexSource, self.table)
            self.fleet = AssignerFleet(
                self.link,
                self.spec.table_id[:8],
                num_slots,
                self.spec.bucket_options,
                source,
                wait=False,
            )
            self.caches.emptied(based_on)
        return self.fleet


def conform_spark(df: DataFrame, spec: TableSpec, deletes: bool) -> DataFrame:
    """The DataFrame with the table's fields, in order, by the rule of
    :func:`~dynbucket.format.records.incoming.fit_types` (widening casts only).

    Raises:
        SchemaMismatchError: extra or missing fields, or a type that does not widen.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

    have = {f.name: to_arrow_type(f.dataType) for f in df.schema.fields}
    cast = set(fit_types(have, spec.schema, required_fields(spec, deletes)))
    columns = []
    for f in spec.schema:
        if f.name not in have:
            columns.append(F.lit(None).cast(from_arrow_type(f.type)).alias(f.name))
        elif f.name in cast:
            columns.append(F.col(f.name).cast(from_arrow_type(f.type)).alias(f.name))
        else:
            columns.append(F.col(f.name))
    return df.select(*columns)


def _with_fields(schema: Any, extra: list[tuple[str, str]]) -> Any:
    from pyspark.sql.types import StructType, _parse_datatype_string

    out = StructType(list(schema.fields))
    for name, ddl in extra:
        out = out.add(name, _parse_datatype_string(ddl), nullable=False)
    return out


def _from_spark(e: BaseException) -> BaseException:
    """A Spark job's failure as the dynbucket error a task raised, when one did. A slot
    actor that died under a task lost the instant's mappings: that is a restart too."""
    if isinstance(e, DynBucketError) or not isinstance(e, Exception):
        return e
    text = str(e)
    if "ActorDiedError" in text or "RayActorError" in text or "ActorUnavailableError" in text:
        return AssignerRestartedError(f"an assigner actor died during the write: {text[:300]}")
    return from_wire(text) or e
