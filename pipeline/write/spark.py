"""Writes of Spark DataFrames: Spark -> slot actors -> Spark, one instant per write.

The parts are chosen once and are small objects: the table's bucket scheme
(``write/schemes.py``: slot actors, or the stateless schemes' layouts), the write's engine
(``write/engines.py``: the driver for small DataFrames, else Spark tasks), and the
skeleton every writer shares (``write/writer.py``: retries with a budget per cause, the
one rule for trusting caches). What follows is the whole path.

The instant's skeleton (lease, stream batch already committed, commit, the actors'
checkpoint flow) is ``write/instant.py``'s; this module brings the Spark parts:

1. Check the DataFrame's schema against the table's (before any instant starts), by the same
   rule as in-process writes.
2. The fleet: one actor per slot, kept across writes; emptied (``reset``) when another writer
   committed in between (``caches.CacheMatch``: its caches would be stale), replaced when
   the slot count changes or a slot is lost.
3. Spark: hash keys (``xxhash64``); stage A, where the rows are, checks them, computes
   partition paths and tags buckets through each row's slot actor (``pmod(hash, N)``); one
   shuffle by (partition, bucket); stage B writes each file group once and the index
   entries. Every slot may fill every bucket (``actors/allocator.py``): the shuffle brings
   a group's rows from every slot to one task. A DataFrame of at most
   ``one_stage_max_bytes`` of a partitioned table is shuffled by partition first instead,
   and one Python stage tags and writes each task's partitions (``engines.tag_and_write``).
4. A dynbucket error raised in a task reaches the driver as itself (``carry_errors``). An
   actor that restarted mid-instant makes the instant run again with a new fleet (twice
   at most; ``WRITE_RETRIES``).

A DataFrame whose plan is at most ``driver_max_bytes`` skips step 3's Spark stages: it is
collected and written in this process, tagged by the same actors (``write/driver.py``); when
it is a bare scan of Parquet files, the driver reads the files itself and no Spark job runs
at all (``write/file_scan.py``); so for a ``createDataFrame`` of local rows at most that size,
which Spark cannot size, taken from the collection that holds them (``write/local_rows.py``).
"""

from __future__ import annotations

import functools
import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dynbucket.actors.fleet import AssignerFleet
from dynbucket.actors.link import RayLink
from dynbucket.base.columns import IS_DELETE
from dynbucket.base.errors import (
    AssignerRestartedError,
    DynBucketError,
    from_wire,
)
from dynbucket.format.file_group.writer import GroupWrites
from dynbucket.format.hudi.meta_fields import IS_DELETED
from dynbucket.format.records.incoming import (
    fit_types,
    kept_fields,
    marker_fields,
    required_fields,
    unique_fields,
)
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.context import Operation, TableRef, WriteContext
from dynbucket.format.table.schemas import WriteSchema
from dynbucket.format.table.spec import TableSpec
from dynbucket.write.driver import estimated_bytes
from dynbucket.write.engines import DriverEngine, SparkTasksEngine, one_stage_fits
from dynbucket.write.instant import InstantWrite, StreamBatch, logs_ready_for
from dynbucket.write.local_rows import read_local
from dynbucket.write.results import Laps, WriteResult
from dynbucket.write.schemes import SparkScheme, spark_scheme
from dynbucket.write.writer import RetryPolicy, Writer

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)
#: A write's retries per cause: twice with a new fleet after a slot restarted; once after a
#: file it read went missing (a service beside it cleaned it).
WRITE_RETRIES = RetryPolicy({AssignerRestartedError: 2, FileNotFoundError: 1})

__all__ = ["SparkWriter", "StreamBatch", "conform_spark"]


class SparkWriter(Writer):
    """Writes Spark DataFrames into one table: its scheme (assigners or layouts) chosen once,
    its engine (driver or Spark tasks) per write; the retries and the instant are the
    skeleton of ``writer.py``.

    Args:
        store, spec: the table.
        link: the Ray cluster and namespace of the slot actors.
        default_slots: assigner slots of a write that names none (Spark's parallelism).
        driver_max_bytes: DataFrames Spark estimates at most this size are written in this
            process (``write/driver.py``); 0: always by Spark tasks.
        one_stage_max_bytes: larger DataFrames Spark estimates at most this size are
            tagged and written by one Python stage after a shuffle by partition
            (``engines.tag_and_write``); 0: always two stages.
    """

    retries = WRITE_RETRIES

    def __init__(
        self,
        store: TableStore,
        spec: TableSpec,
        link: RayLink,
        default_slots: int,
        driver_max_bytes: int = 0,
        one_stage_max_bytes: int = 0,
    ) -> None:
        super().__init__(store, spec)
        self.link = link
        self.default_slots = default_slots
        self.driver_max_bytes = driver_max_bytes
        self.one_stage_max_bytes = one_stage_max_bytes

    @functools.cached_property
    def table(self) -> TableRef:
        """The table as Spark tasks and slot actors receive it."""
        return TableRef.of(self.store, self.spec)

    @functools.cached_property
    def scheme(self) -> SparkScheme:
        """How rows get buckets (``write/schemes.py``)."""
        return spark_scheme(self.table, self.caches, self.link)

    @property
    def fleet(self) -> AssignerFleet | None:
        """The dynamic scheme's slot actors (None: none started, or a stateless scheme)."""
        return self.scheme.fleet

    def prestart(self, slots: int | None, latest: str | None) -> None:
        """Starts the fleet of a write with ``slots`` slots now, without waiting for it:
        the actors start while the caller prepares its first write. Their caches are empty,
        so they match the table as of ``latest``; a commit by another writer before the
        first write empties them as usual."""
        if self.fleet is None:  # a scheme without actors has none to start: a no-op
            self.scheme.assigners(slots or self.default_slots, latest)

    def close(self) -> None:
        if "scheme" in self.__dict__:
            self.scheme.close()

    def write(
        self,
        df: DataFrame,
        operation: str | Operation,
        slots: int | None = None,
        stream: StreamBatch | None = None,
        file_stream: bool = False,
        partial: bool = False,
    ) -> WriteResult:
        """One instant, run again (``WRITE_RETRIES``) when an assigner actor restarted in the
        middle of it (then with a new fleet). ``file_stream``: ``df`` is a micro-batch of a
        bare Parquet file stream (:func:`~dynbucket.write.file_scan.bare_file_stream`);
        ``partial``: an upsert whose records lack fields, whose values a known key keeps."""
        op = Operation.of(operation)
        laps = Laps()  # ``total`` from the first attempt on, as in process
        return self._retrying(
            op, lambda: self._write(df, op, slots, stream, file_stream, partial, laps)
        )

    def _reset(self, error: BaseException) -> None:
        if not isinstance(error, FileNotFoundError):
            log.warning("an assigner actor restarted during the write; retrying it")
        self.close()  # a new fleet: nothing of the old view stays cached

    # --- one attempt ---------------------------------------------------------------------

    def _write(
        self,
        given: DataFrame,
        op: Operation,
        slots: int | None,
        stream: StreamBatch | None,
        file_stream: bool,
        partial: bool = False,
        laps: Laps | None = None,
    ) -> WriteResult:
        """1. The DataFrame conformed to the table; the engine chosen by its size.
        2. The instant begins; the assigners open it (a fleet started or emptied while the
           driver engine reads the rows).
        3. Stage A from the scheme, the stages run by the engine, the commit."""
        laps = laps or Laps()
        laps.last = time.perf_counter()  # this attempt's first step starts now
        incoming = None if op.deletes else spark_arrow_schema(given)
        schema = WriteSchema.of(self.store, self.spec, incoming)
        spec = schema.spec
        kept = kept_fields(spec, given.columns, partial)
        required = required_fields(spec, op.deletes, partial)
        df = conform_spark(given, spec, required)  # 1.
        logs_ready_for(schema, self.compact)
        num_slots = slots or self.default_slots
        local = None
        if self.driver_max_bytes > 0 and not file_stream:
            local = read_local(given, spec, required, self.driver_max_bytes)
        driver = DriverEngine(given, df, spec, file_stream, required, local)
        engine = self._engine(df, spec, driver, local is not None)
        scheme = self.scheme

        def body(w: InstantWrite) -> tuple[GroupWrites, dict[str, Any]]:  # 2.
            assigners = scheme.assigners(num_slots, w.last_write, w.latest)
            engine.prepare(op, laps)
            w.open(assigners)
            laps.lap("prepare")
            stage_a = scheme.stage_a(w, op, kept)  # 3.
            slots_of_index = scheme.index_slots(num_slots)
            table = TableRef.of(self.store, spec)
            ctx = WriteContext(table, w.id, w.visible, op, slots_of_index, kept)
            written, shuffles = engine.run(stage_a, ctx, laps)
            return written, {**scheme.metadata(num_slots, shuffles), **engine.metadata}

        try:
            return self._instant(op, schema, laps, kept, body, stream)
        except Exception as e:
            mapped = _from_spark(e)
            if mapped is e:
                raise
            raise mapped from e

    def _engine(
        self, df: DataFrame, spec: TableSpec, driver: DriverEngine, local: bool
    ) -> DriverEngine | SparkTasksEngine:
        """``driver`` for a DataFrame of ``local`` rows or one Spark estimates at most
        ``driver_max_bytes`` (a streaming micro-batch of a file source is sized by its
        files; a source Spark cannot size goes to Spark tasks); else Spark tasks, in one
        Python stage when the table allows it (``engines.one_stage_fits``) and Spark
        estimates the DataFrame at most ``one_stage_max_bytes``."""
        if local:
            return driver
        sized = self.driver_max_bytes > 0 or self.one_stage_max_bytes > 0
        size = estimated_bytes(df) if sized else None
        if within(size, self.driver_max_bytes):
            return driver
        one_stage = within(size, self.one_stage_max_bytes) and one_stage_fits(spec)
        return SparkTasksEngine(df, one_stage=one_stage)


def within(size: int | None, limit: int) -> bool:
    """Whether a DataFrame Spark sized ``size`` (None: it could not) is within ``limit``
    (0: none is, not even an empty one)."""
    return limit > 0 and size is not None and size <= limit


def conform_spark(df: DataFrame, spec: TableSpec, required: Sequence[str] | None) -> DataFrame:
    """The DataFrame with the table's fields, in order, by the rule of
    :func:`~dynbucket.format.records.incoming.fit_types` (widening casts only; ``required``
    as it takes them), and ``_is_delete`` when it carries a delete marker.

    Raises:
        SchemaMismatchError: extra or missing fields, or a type that does not widen.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type, to_arrow_type

    unique_fields(df.columns)
    have = {f.name: to_arrow_type(f.dataType) for f in df.schema.fields}
    cast = set(fit_types(have, spec.schema, required, marker_fields(spec)))
    columns = []
    for f in spec.schema:
        if f.name not in have:
            columns.append(F.lit(None).cast(from_arrow_type(f.type)).alias(f.name))
        elif f.name in cast:
            columns.append(F.col(f.name).cast(from_arrow_type(f.type)).alias(f.name))
        else:
            columns.append(F.col(f.name))
    # The records' delete markers as one flag (incoming.delete_flags's rule, in Spark).
    flags = []
    if IS_DELETED in have:
        flags.append(F.coalesce(F.col(IS_DELETED).cast("boolean"), F.lit(False)))
    field, marker = spec.options.delete_field, spec.options.delete_marker
    if field is not None and field in have:
        flags.append(F.coalesce(F.col(field).cast("string") == F.lit(marker), F.lit(False)))
    if flags:
        flag = flags[0] if len(flags) == 1 else flags[0] | flags[1]
        columns.append(flag.alias(IS_DELETE))
    return df.select(*columns)


def spark_arrow_schema(df: DataFrame) -> pa.Schema:
    """A DataFrame's schema as Arrow's: its fields, their types and nullability."""
    from pyspark.sql.pandas.types import to_arrow_type

    return pa.schema(
        [pa.field(f.name, to_arrow_type(f.dataType), f.nullable) for f in df.schema.fields]
    )


def _from_spark(e: BaseException) -> BaseException:
    """A Spark job's failure as the dynbucket error a task raised, when one did. A slot
    actor that died under a task lost the instant's mappings: that is a restart too."""
    if isinstance(e, DynBucketError) or not isinstance(e, Exception):
        return e
    text = str(e)
    if "ActorDiedError" in text or "RayActorError" in text or "ActorUnavailableError" in text:
        return AssignerRestartedError(f"an assigner actor died during the write: {text[:300]}")
    carried = from_wire(text)
    if carried is None and "FileNotFoundError" in text:  # a task read a file a clean removed
        line = next((x for x in text.splitlines() if "FileNotFoundError" in x), "")
        return FileNotFoundError(line.strip()[:300])
    return carried or e
