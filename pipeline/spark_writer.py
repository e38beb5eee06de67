"""Writes of Spark DataFrames: Spark -> slot actors -> Spark, one instant per write.

1. Check the DataFrame's schema against the table's (before any instant starts).
2. Begin the instant (lease, rollback of dead instants) and, for a stream, skip a micro-batch
   that is already committed (exactly once).
3. The fleet: one actor per slot, kept across writes, replaced when the slot count changes or
   another writer committed in between (its caches would be stale).
4. Spark: hash keys (``xxhash64``) and route each slot's rows to one task; stage A checks the
   rows, computes partition paths and tags buckets through the slot's actor; a shuffle by
   (partition, bucket); stage B writes each file group once and the index entries.
   When every commit of the table used the current slot count N, bucket ``b`` only holds
   keys of slot ``b mod N`` (slots create ids in their residue class), so the slot's task
   already holds all rows of its file groups: stage B runs in the same task, with no second
   shuffle. Each row is checked (``bucket mod N == hash mod N``); a violation fails the
   attempt with ``SlotLayoutError`` and the write is redone with two shuffles.
5. Commit (checking lease and timeline), then the actors' snapshot; on failure, roll back and
   abort the checkpoint in the actors (I8). An actor that restarted mid-instant makes the
   instant retry once with the new fleet.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import re
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from dynbucket.actors.assigner import NO_CHECKPOINT
from dynbucket.actors.keys import slot_of
from dynbucket.pipeline import errors
from dynbucket.pipeline.assign_stage import ArrowFn, assign_fn, tagged_schema
from dynbucket.pipeline.errors import (
    AssignerRestartedError,
    DynBucketError,
    SchemaMismatchError,
    SlotLayoutError,
)
from dynbucket.pipeline.fleet import AssignerFleet
from dynbucket.pipeline.index_source import RLIIndexSource
from dynbucket.pipeline.raylink import RayLink
from dynbucket.pipeline.records import annotate
from dynbucket.pipeline.results import Laps, WriteResult
from dynbucket.pipeline.routing import route_column
from dynbucket.pipeline.spec import BUCKET, HASH, OP, PARTITION, TableSpec
from dynbucket.pipeline.storage import TableStore
from dynbucket.pipeline.timeline import Timeline
from dynbucket.pipeline.transaction import Transaction, WrittenFile
from dynbucket.pipeline.write_stage import WRITTEN, write_fn

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

    from dynbucket.pipeline.runtime import Runtime

log = logging.getLogger(__name__)
_ROUTE = "_route"
_ERROR = re.compile(r"dynbucket\.pipeline\.errors\.(\w+): (.+)")


@dataclasses.dataclass(frozen=True)
class StreamBatch:
    """A micro-batch of a stream: committed at most once per (stream, batch id)."""

    stream: str
    batch_id: int


class SparkWriter:
    """Writes Spark DataFrames into one table; owns that table's assigner fleet."""

    def __init__(self, store: TableStore, spec: TableSpec, runtime: Runtime) -> None:
        self.store = store
        self.spec = spec
        self.runtime = runtime
        self.link = RayLink(runtime.ray_address, runtime.config.namespace)
        self.fleet: AssignerFleet | None = None
        self._seen: str | None = None
        self._slots_of: dict[str, int | None] = {}

    def close(self) -> None:
        if self.fleet is not None:
            try:
                self.fleet.close()
            finally:
                self.fleet = None

    def write(self, df: DataFrame, operation: str, slots: int | None = None,
              stream: StreamBatch | None = None) -> WriteResult:  # fmt: skip
        """One instant; retried once if an assigner actor restarted in the middle of it."""
        fused = True
        for attempt in (1, 2, 3):
            try:
                return self._write(df, operation, slots, stream, fused)
            except SlotLayoutError:
                if not fused:
                    raise
                log.warning("a file group spans assigner slots; writing with two shuffles")
                fused = False
            except AssignerRestartedError:
                if attempt == 3:
                    raise
                log.warning("an assigner actor restarted during the write; retrying it")
                self.close()
        raise AssertionError("unreachable")

    # --- one attempt ---------------------------------------------------------------------

    def _write(self, df: DataFrame, operation: str, slots: int | None,
               stream: StreamBatch | None, fused: bool) -> WriteResult:  # fmt: skip
        deletes = operation == "delete"
        laps = Laps()
        df = conform_spark(df, self.spec, deletes)
        txn = Transaction.begin(self.store, "commit", operation,
                                self.spec.options.lock_lease_seconds)  # fmt: skip
        if stream is not None and _committed(txn.timeline, stream):
            txn.abort()
            return WriteResult(instant="", operation=f"{operation} (batch {stream.batch_id} "
                               "already committed)", rows_written=0)  # fmt: skip
        num_slots = slots or self.runtime.default_parallelism
        checkpoint = txn.instant.checkpoint
        fleet: AssignerFleet | None = None
        try:
            fleet = self._fleet_for(num_slots, txn.based_on)
            fleet.begin(checkpoint, int(txn.based_on) if txn.based_on else NO_CHECKPOINT)
            before = sum(s["buckets_created"] for s in fleet.stats())
            laps.lap("prepare")
            visible = frozenset(i.id for i in txn.timeline.completed())
            fused = fused and self._one_slot_count(txn.timeline, num_slots)
            rows = self._job(df, fleet, txn.id, visible, operation, num_slots, fused).collect()
            laps.lap("spark")
            counts = self._record(txn, rows)
            created = sum(s["buckets_created"] for s in fleet.stats()) - before
            result = WriteResult(
                instant=txn.id, operation=operation, buckets_created=created,
                files_written=sum(1 for r in rows if r["kind"] in ("base", "delta")),
                rows_written=sum(r["rows"] for r in rows if r["kind"] in ("base", "delta")),
                **counts,
            )  # fmt: skip
            extra: dict[str, Any] = {"stats": result.as_dict(), "slots": num_slots,
                                     "shuffles": 1 if fused else 2}  # fmt: skip
            if stream is not None:
                extra["stream"] = {"id": stream.stream, "batch": stream.batch_id}
            txn.commit(extra)
            laps.lap("commit")
        except BaseException as e:
            txn.abort()
            if fleet is not None:
                self._abort(fleet, checkpoint)
            mapped = _from_spark(e)
            if mapped is e:
                raise
            raise mapped from e
        fleet.snapshot(checkpoint, checkpoint)
        self._seen = txn.id
        return dataclasses.replace(result, seconds=laps.laps)

    def _job(self, df: DataFrame, fleet: AssignerFleet, instant: str, visible: frozenset[str],
             operation: str, num_slots: int, fused: bool) -> DataFrame:  # fmt: skip
        from pyspark.sql import functions as F

        spec = self.spec
        deletes = operation == "delete"
        hashed = df.withColumn(HASH, F.xxhash64(*spec.record_key))
        routed = hashed.withColumn(_ROUTE, route_column(HASH, num_slots)).repartition(
            num_slots, _ROUTE).drop(_ROUTE)  # fmt: skip
        prepare = functools.partial(_prepare, spec, deletes)
        stage_a = assign_fn(
            self.link, fleet.names, int(instant), prepare=prepare,
            method="locate" if deletes else "assign",
            refuse_known=spec.record_key if operation == "insert" else (),
        )  # fmt: skip
        stage_b = write_fn(self.store.uri, self.store.fs, spec, instant, visible, deletes)
        if fused:
            return routed.mapInArrow(_fused(stage_a, stage_b, num_slots), WRITTEN)
        tagged_struct = _with_fields(routed.schema, [(PARTITION, "string"), (OP, "tinyint")])
        tagged = routed.mapInArrow(stage_a, tagged_schema(tagged_struct))
        shuffled = tagged.repartition(PARTITION, BUCKET)
        return shuffled.mapInArrow(stage_b, WRITTEN)

    def _one_slot_count(self, timeline: Timeline, num_slots: int) -> bool:
        """Whether every completed commit of the table was written with ``num_slots`` slots
        (commits without a slot count, e.g. in-process pyarrow writes, count as other)."""
        for instant in timeline.completed("commit"):
            if instant.id not in self._slots_of:
                self._slots_of[instant.id] = timeline.metadata(instant).get("slots")
            if self._slots_of[instant.id] != num_slots:
                return False
        return True

    def _record(self, txn: Transaction, rows: list[Any]) -> dict[str, int]:
        totals = {"keys_inserted": 0, "keys_updated": 0, "keys_deleted": 0, "keys_not_found": 0}
        for r in rows:
            if r["kind"] != "none":
                txn.add(WrittenFile(r["partition"], r["path"], r["kind"], r["rows"], r["bytes"],
                                    r["file_id"], r["bucket"]))  # fmt: skip
            totals["keys_inserted"] += r["inserted"]
            totals["keys_updated"] += r["updated"]
            totals["keys_deleted"] += r["deleted"]
            totals["keys_not_found"] += r["not_found"]
        return totals

    def _fleet_for(self, num_slots: int, based_on: str | None) -> AssignerFleet:
        """The fleet, replaced when the slot count changed or another writer committed."""
        if self.fleet is not None and (self.fleet.num_slots != num_slots or based_on != self._seen):
            self.close()
        if self.fleet is None:
            source = functools.partial(RLIIndexSource, self.store.uri, self.spec, self.store.fs)
            self.fleet = AssignerFleet(self.link, self.spec.table_id[:8], num_slots,
                                       self.spec.index, source)  # fmt: skip
        return self.fleet

    def _abort(self, fleet: AssignerFleet, checkpoint: int) -> None:
        try:
            fleet.abort(checkpoint)
        except Exception as e:  # an actor died: its caches died with it
            log.warning("could not abort checkpoint %s in the actors (%s); replacing them",
                        checkpoint, e)  # fmt: skip
            self.close()


def conform_spark(df: DataFrame, spec: TableSpec, deletes: bool) -> DataFrame:
    """The DataFrame with the table's fields, in order; widening casts only.

    Raises:
        SchemaMismatchError: extra or missing fields, or a type that does not widen.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

    names = set(df.columns)
    extra = sorted(names - set(spec.schema.names))
    if extra:
        raise SchemaMismatchError(
            f"field(s) {extra} are not in the table schema ({spec.schema.names}); drop them"
        )
    required = [*spec.record_key, *spec.partition_by] if deletes else spec.schema.names
    missing = [n for n in dict.fromkeys(required) if n not in names]
    if missing:
        raise SchemaMismatchError(f"field(s) {missing} of the table schema are missing")
    columns = []
    for f in spec.schema:
        if f.name not in names:
            columns.append(F.lit(None).cast(from_arrow_type(f.type)).alias(f.name))
            continue
        have = to_arrow_type(df.schema[f.name].dataType)
        if have != f.type and not _widens(have, f.type):
            raise SchemaMismatchError(
                f"field {f.name!r} has type {have}; the table has {f.type}: cast it first"
            )
        column = F.col(f.name)
        columns.append(column.cast(from_arrow_type(f.type)).alias(f.name) if have != f.type
                       else column)  # fmt: skip
    return df.select(*columns)


def _widens(have: pa.DataType, want: pa.DataType) -> bool:
    if pa.types.is_integer(have) and pa.types.is_integer(want):
        return want.bit_width >= have.bit_width and (
            pa.types.is_signed_integer(want) or not pa.types.is_signed_integer(have)
        )
    if pa.types.is_floating(have) and pa.types.is_floating(want):
        return want.bit_width >= have.bit_width
    # Timestamps: the same instant in another unit or zone label; Spark casts exactly.
    return pa.types.is_timestamp(have) and pa.types.is_timestamp(want)


def _fused(stage_a: ArrowFn, stage_b: ArrowFn, num_slots: int) -> ArrowFn:
    """Stages A and B in one task, checking that every row's bucket is of its slot."""

    def checked(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            buckets = batch.column(BUCKET).to_numpy(zero_copy_only=False).astype(np.int64)
            hashes = batch.column(HASH).to_numpy(zero_copy_only=False)
            known = buckets >= 0
            if np.any(buckets[known] % num_slots != slot_of(hashes[known], num_slots)):
                raise SlotLayoutError(
                    f"a bucket holds keys of another slot under {num_slots} slots"
                )
            yield batch

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        yield from stage_b(checked(stage_a(batches)))

    return run


def _prepare(spec: TableSpec, deletes: bool, batch: pa.RecordBatch) -> pa.RecordBatch:
    """Stage A's check of one batch: keys, ordering values, partition paths, ``_op``."""
    table = annotate(spec, pa.Table.from_batches([batch]), deletes=deletes, with_hash=False)
    batches = table.combine_chunks().to_batches()
    return batches[0] if batches else pa.RecordBatch.from_pylist([], schema=table.schema)


def _with_fields(schema: Any, extra: list[tuple[str, str]]) -> Any:
    from pyspark.sql.types import StructType, _parse_datatype_string

    out = StructType(list(schema.fields))
    for name, ddl in extra:
        out = out.add(name, _parse_datatype_string(ddl), nullable=False)
    return out


def _committed(timeline: Timeline, stream: StreamBatch) -> bool:
    """Whether a commit of this stream at or after this batch id is on the timeline."""
    for instant in reversed(timeline.completed("commit")):
        recorded = timeline.metadata(instant).get("stream")
        if recorded and recorded.get("id") == stream.stream:
            return bool(recorded["batch"] >= stream.batch_id)
    return False


def _from_spark(e: BaseException) -> BaseException:
    """A Spark job's failure as the dynbucket error a task raised, when one did. A slot
    actor that died under a task lost the instant's mappings: that is a restart too."""
    if isinstance(e, DynBucketError) or not isinstance(e, Exception):
        return e
    text = str(e)
    if "ActorDiedError" in text or "RayActorError" in text or "ActorUnavailableError" in text:
        return AssignerRestartedError(f"an assigner actor died during the write: {text[:300]}")
    match = _ERROR.search(text)
    if match is None:
        return e
    cls = getattr(errors, match.group(1), None)
    if isinstance(cls, type) and issubclass(cls, DynBucketError):
        return cls(match.group(2).strip())
    return e
