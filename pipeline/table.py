"""A dynbucket table: create, open, read, write, and its services (the public API).

A thin layer: the table on storage is ``format/``'s (definition, snapshots, lookups,
services), writes run through ``write/`` (in this process for a pyarrow Table, Spark tasks
and the assigner actors for a Spark DataFrame).
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs

from dynbucket import inputs
from dynbucket.actors.link import RayLink
from dynbucket.base.errors import (
    ConfigError,
    RuntimeSetupError,
    TableClosedError,
)
from dynbucket.format.adoption.adopt import adopt
from dynbucket.format.adoption.metadata import undo
from dynbucket.format.buckets import regroup
from dynbucket.format.health.check import CheckReport, check
from dynbucket.format.index.rli import RecordLevelIndex
from dynbucket.format.read import changes
from dynbucket.format.read.snapshot import Snapshot, read_ref
from dynbucket.format.services.rollback import rollback
from dynbucket.format.services.runner import ServiceRunner
from dynbucket.format.services.service import Scope, ServiceResult
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table import schemas
from dynbucket.format.table.context import TableRef
from dynbucket.format.table.create import create_table
from dynbucket.format.table.spec import TableSpec, load_table, table_name_for
from dynbucket.format.timeline.actions import Action
from dynbucket.format.timeline.history import history
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.inputs import Rows
from dynbucket.options import DynamicBucketIndex, IndexOptions, SimpleBucketIndex, TableOptions
from dynbucket.runtime import Runtime, active_runtime
from dynbucket.write.local import LocalWriter
from dynbucket.write.local_rows import arrow_frame
from dynbucket.write.ray_tasks import RayTasks
from dynbucket.write.results import WriteResult

if TYPE_CHECKING:
    import pandas as pd
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.streaming import StreamingQuery

    from dynbucket.write.spark import SparkWriter


def _table_options(options: TableOptions | Mapping[str, object] | None) -> TableOptions:
    """``TableOptions`` as given, or read from a mapping of their persisted keys (as Hudi's
    users pass ``hoodie.*`` options); a key no option has is a ``ConfigError`` naming it
    and the known keys."""
    if options is None:
        return TableOptions()
    if isinstance(options, TableOptions):
        return options
    if not isinstance(options, Mapping):
        raise ConfigError(
            f"options={options!r}: must be TableOptions or a mapping of option keys "
            '(e.g. {"hoodie.clean.automatic": False})'
        )
    return TableOptions.from_properties(
        {k: str(v).lower() if isinstance(v, bool) else str(v) for k, v in options.items()}
    )


class Table:
    """A table on any pyarrow filesystem (a local path by default)."""

    def __init__(
        self,
        store: TableStore,
        spec: TableSpec,
        runtime: Runtime | None = None,
        assigner_slots: int | None = None,
    ) -> None:
        self._store = store
        self._spec = spec
        self.runtime = runtime
        self.assigner_slots = assigner_slots
        self._local: LocalWriter | None = None
        self._spark: SparkWriter | None = None
        self._runner: ServiceRunner | None = None
        self._closed = False

    def __repr__(self) -> str:
        s = self._spec
        keys = ",".join(s.record_key)
        parts = f" partition_by={','.join(s.partition_by)}" if s.partition_by else ""
        return (
            f"<dynbucket.Table {s.name} at {self.uri}: {s.options.table_type} "
            f"(Hudi table version {s.table_version}), key={keys}{parts}, "
            f"index={type(s.bucket_options).__name__.replace('Options', 'Index')}>"
        )

    def __enter__(self) -> Table:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Waits for a compaction running beside the writes, and releases the assigner
        actors this table started (the table stays on storage). A closed table refuses
        writes and services (``TableClosedError``); it still reads."""
        self._closed = True
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        if self._spark is not None:
            self._spark.close()
            self._spark = None

    # --- lifecycle -----------------------------------------------------------------------

    @classmethod
    def create(
        cls,
        uri: str,
        schema: pa.Schema,
        record_key: str | Sequence[str],
        partition_by: str | Sequence[str] = (),
        ordering_field: str | None = None,
        index: IndexOptions | None = None,
        options: TableOptions | Mapping[str, object] | None = None,
        filesystem: pafs.FileSystem | None = None,
        runtime: Runtime | None = None,
        name: str | None = None,
    ) -> Table:
        """Creates an empty table at ``uri``: an Apache Hudi table (version 6), merge-on-read
        unless ``options`` says ``table_type="COPY_ON_WRITE"``.

        Args:
            uri: a local path, ``file://``, ``s3://`` ... (any pyarrow filesystem).
            schema: the records' Arrow schema.
            record_key: the field(s) identifying a record (unique per partition).
            partition_by: field(s) naming hive-style partitions.
            ordering_field: when two records of a key meet, the larger value wins.
            index: the bucket index: ``DynamicBucketIndex`` (bucket options and assigner
                slots; the default), ``SimpleBucketIndex`` or ``ConsistentHashingIndex``.
            options: table options (services, lease): ``TableOptions``, or a mapping of
                their persisted keys (``{"hoodie.clean.automatic": False}``).
            filesystem: a pyarrow filesystem, when ``uri`` is a path on it.
            runtime: the Spark-on-Ray runtime for Spark writes and reads (default: the
                active one). Given, the assigner actors start at once, in the background.
            name: the Hudi table name (default: from the folder's name).

        Raises:
            TableExistsError: a table (or other files) is already there.
            ConfigError, SchemaMismatchError: the definition is not valid.
        """
        store = TableStore.at(uri, filesystem)
        table_options = _table_options(options)
        spec = TableSpec(
            schema=schema,
            record_key=(record_key,) if isinstance(record_key, str) else tuple(record_key),
            partition_by=(partition_by,) if isinstance(partition_by, str) else tuple(partition_by),
            ordering_field=ordering_field,
            bucket_options=index or DynamicBucketIndex(),
            options=table_options,
            table_id=uuid.uuid4().hex,
            name=name or table_name_for(store.uri),
            table_version=table_options.table_version,
        )
        create_table(store, spec)
        slots = getattr(index, "assigner_slots", None)  # a dynamic index's write setting
        return cls(store, spec, runtime, slots)._prestarted()

    @classmethod
    def open(
        cls,
        uri: str,
        filesystem: pafs.FileSystem | None = None,
        runtime: Runtime | None = None,
        assigner_slots: int | None = None,
    ) -> Table:
        """Opens the table at ``uri``, checking its properties.

        With ``runtime`` given, the assigner actors of Spark writes (``assigner_slots`` of
        them) start at once, in the background; ``close()`` stops them.

        Raises:
            NotATableError: no dynbucket table there (``NotAdoptedError``: a table
                Apache Hudi wrote, not adopted yet: :meth:`adopt`).
            UnsupportedTableVersionError: a Hudi table version or timeline layout other
                than 6/1, 8/2 and 9/2; nothing was read.
            TableCorruptedError: properties this version cannot read.
        """
        store = TableStore.at(uri, filesystem)
        return cls(store, load_table(store), runtime, assigner_slots)._prestarted()

    @classmethod
    def adopt(
        cls,
        uri: str,
        index: DynamicBucketIndex | SimpleBucketIndex | None = None,
        options: TableOptions | Mapping[str, object] | None = None,
        filesystem: pafs.FileSystem | None = None,
        runtime: Runtime | None = None,
        deduplicate: bool = False,
    ) -> Table:
        """Makes the table Apache Hudi wrote at ``uri`` a dynbucket table, in place, and
        opens it: every file stays where Hudi put it (its file groups become buckets), the
        record-level index is built from its rows, and the table keeps its Hudi version.
        :meth:`undo_adoption` undoes it.

        Args:
            uri: the Hudi table's folder.
            index: ``DynamicBucketIndex`` (each file group Hudi wrote becomes a bucket, its
                keys indexed), or, for a table Hudi wrote with its bucket index,
                ``SimpleBucketIndex`` of its bucket count (every key checked to be where
                Hudi's bucket hash puts it). Default: the bucket index when the table's
                properties name one (``hoodie.index.type=BUCKET``), else the dynamic one.
            options: dynbucket's table options (services, lease), as for :meth:`create`.
            filesystem: a pyarrow filesystem, when ``uri`` is a path on it.
            runtime: the Spark-on-Ray runtime for Spark writes and reads; given, the
                record-level index is built by Ray tasks over the cluster.
            deduplicate: a key with more than one live row (Hudi's ``insert`` and
                ``bulk_insert`` allow it) keeps its row with the largest ordering value
                (ties: the latest commit); the others are removed in one commit of new
                file slices, which stays if the adoption is undone (``adopted.json`` says
                what it removed). Without it such a table is refused.

        Raises:
            AdoptionRefusedError: a table dynbucket cannot continue yet (base files not
                in Parquet, a key generator dynbucket does not spell, a key with two live
                rows, an instant pending, keys not where the given bucket index puts
                them, ...); the message says which and what to do; nothing was written.
            TableExistsError: already a dynbucket table.
            NotATableError: no Hudi table there.
        """
        store = TableStore.at(uri, filesystem)
        slots = getattr(index, "assigner_slots", None)  # a dynamic index's write setting
        own = _table_options(options).own_properties()
        # With a cluster, the index is built by Ray tasks; else by threads here.
        tasks = RayTasks(max_retries=1) if runtime is not None else None
        adopt(store, index, own, slots or 1, tasks, deduplicate)
        return cls.open(uri, filesystem, runtime, slots)

    @staticmethod
    def undo_adoption(uri: str, filesystem: pafs.FileSystem | None = None) -> None:
        """Undoes :meth:`adopt` of the table at ``uri`` while nothing was written since:
        its ``hoodie.properties`` and the metadata table partitions adoption removed come
        back, and ``.hoodie/.dynbucket/`` goes (a deduplication's commit stays: it is a
        Hudi commit). Close the table first.

        Raises:
            NotAdoptedError: not a table dynbucket adopted.
            AdoptionRefusedError: an instant was written since (the removed partitions
                would be stale); nothing is changed.
        """
        undo(TableStore.at(uri, filesystem))

    def _prestarted(self) -> Table:
        """With a ``runtime`` given, the assigner actors of Spark writes start now, in the
        background, so that the first write does not wait for them (``close()`` stops
        them)."""
        if self.runtime is not None:
            self._spark_writer().prestart(self.assigner_slots, self.latest_instant())
        return self

    @property
    def uri(self) -> str:
        return self._store.uri

    @property
    def spec(self) -> TableSpec:
        """The table's definition as it was opened (keys, partitioning, options, bucket
        scheme, version); ``schema`` is the schema now."""
        return self._spec

    @property
    def store(self) -> TableStore:
        """Where the table lives: its filesystem and root (what the format layer's
        functions take)."""
        return self._store

    @property
    def _timeline(self) -> Timeline:
        return Timeline(self._store, self._spec.options.merge_on_read)

    @property
    def schema(self) -> pa.Schema:
        """The records' Arrow schema now (the table's fields, without Hudi's meta fields):
        as created, or as the latest write that evolved it left it."""
        return self._current().schema

    def schema_history(self) -> list[tuple[str | None, pa.Schema]]:
        """The table's schemas, oldest first: (None, the schema it was created with), then
        (instant, schema) per write that evolved it (of the instants still readable or
        archived)."""
        changes = schemas.history(self._store, self._timeline.visible())
        return [(None, self._spec.schema), *changes]

    def _current(self) -> TableSpec:
        """The table's definition with its schema now."""
        return schemas.current(self._store, self._spec)

    def latest_instant(self) -> str | None:
        completed = self._timeline.completed()
        return completed[-1].id if completed else None

    # --- reads ---------------------------------------------------------------------------

    def snapshot(self, as_of: str | None = None) -> Snapshot:
        return Snapshot(self._store, self._spec, as_of)

    def to_arrow(
        self,
        as_of: str | None = None,
        columns: Sequence[str] | None = None,
        meta_columns: bool = True,
        read_optimized: bool = False,
        filter: pc.Expression | None = None,  # noqa: A002 (as delta-rs and pyarrow name it)
    ) -> pa.Table:
        """The table's live rows as of ``as_of`` (default: latest): ``columns`` of them
        (default all), then the meta columns (``_partition``, ``_bucket``, ``_file_id``,
        ``_instant``) unless ``meta_columns=False``.

        ``filter``: a pyarrow compute expression of the table's fields, e.g.
        ``(pc.field("country") == "fr") & (pc.field("updated_at") > 100)``; only the rows it
        keeps are returned, and what cannot hold one is not read: partitions whose path
        makes it false, and row groups whose statistics do (merge-on-read slices with logs
        are merged first, then filtered, so an older version of a row never shows).

        ``read_optimized``: only the base files of the latest file slices (log files not
        merged), as Hudi's read-optimized queries read a merge-on-read table.
        """
        return self.snapshot(as_of).to_arrow(
            columns, meta_columns, read_optimized=read_optimized, filter=filter
        )

    def to_pandas(
        self,
        as_of: str | None = None,
        columns: Sequence[str] | None = None,
        meta_columns: bool = True,
        read_optimized: bool = False,
        filter: pc.Expression | None = None,  # noqa: A002
    ) -> pd.DataFrame:
        """:meth:`to_arrow` as a pandas DataFrame."""
        return self.to_arrow(as_of, columns, meta_columns, read_optimized, filter).to_pandas()

    def changes(
        self,
        start: str,
        end: str | None = None,
        columns: Sequence[str] | None = None,
        meta_columns: bool = True,
        filter: pc.Expression | None = None,  # noqa: A002
    ) -> pa.Table:
        """What the instants after ``start`` up to ``end`` (default: the latest) changed, as
        Hudi's incremental query returns it: the latest version of each record they wrote,
        with its commit time (``_instant``, Hudi's ``_hoodie_commit_time``). Deletes are
        not reported. ``start`` and ``end`` are instant times on version 6 tables, and
        completion times on version 8 and 9 tables (as Hudi 1.x and hudi-rs read them). A
        downstream job reads up to ``changes_end()`` and passes that as its next ``start``;
        ``start="000"`` (Hudi's "from the beginning") returns every live record.
        ``filter``: as :meth:`to_arrow`'s.

        Raises:
            ConfigError: ``start`` or ``end`` is not an instant time (yyyyMMddHHmmssSSS),
                or the table keeps no meta fields.
            InstantNotFoundError: ``end`` is not a completed instant, or was cleaned or
                archived; ``start`` is older than the active timeline.
            IncompleteRangeError: (version 6) ``end`` is past a write still pending.
        """
        return changes.changes(
            self._store, self._spec, start, end, columns, meta_columns, filter=filter
        )

    def changes_end(self) -> str:
        """Where a change feed can read up to now: pass it as ``changes``' ``end``, and
        keep it as the next read's ``start``. A feed that does so never skips a commit,
        however several writers' commits interleave: version 6 tables range by instant
        time, and this is the newest instant completed before any write still pending;
        version 8 and 9 tables range by completion time (as Hudi 1.x and hudi-rs do), and
        this is the newest completion time. "000" when nothing completed yet."""
        return changes.feed_end(self._store, self._spec)

    def to_spark(
        self,
        spark: SparkSession,
        as_of: str | None = None,
        columns: Sequence[str] | None = None,
        meta_columns: bool = True,
        driver_max_bytes: int = 0,
    ) -> DataFrame:
        """The table's live rows as a Spark DataFrame (file slices merged in Spark tasks;
        a snapshot whose files total at most ``driver_max_bytes`` is read here and handed to
        Spark as Arrow)."""
        snapshot = self.snapshot(as_of)
        return _snapshot_to_spark(snapshot, spark, columns, meta_columns, driver_max_bytes)

    def record_index_locations(
        self, partition: str, columns: Sequence[str] | None = None
    ) -> pa.Table:
        """The partition's record-level index entries (committed), reading only ``columns``."""
        visible = self._timeline.visible()
        return RecordLevelIndex(self._store, self._spec).record_index_locations(
            partition, visible, columns
        )

    def lookup(
        self, keys: pa.Table, as_of: str | None = None, meta_columns: bool = True
    ) -> pa.Table:
        """Live rows of the given keys (key fields, plus partition fields when partitioned).

        Each key is found through the record-level index, and of its file group only the
        row groups of the base file that can hold it are read, and its logs.
        """
        return self.snapshot(as_of).lookup(keys, meta_columns)

    def stats(self, as_of: str | None = None) -> pa.Table:
        """Per partition and bucket: keys, bytes and files; for a simple-bucket table also
        each partition's ``num_buckets``, for consistent hashing each bucket's ring range
        (``range_start``, ``range_end``)."""
        return self.snapshot(as_of).stats()

    def history(self) -> list[dict[str, Any]]:
        """Every instant, oldest first: ``instant``, ``action`` (Hudi's: ``commit``, or
        ``deltacommit`` for a merge-on-read table's writes; ``compaction``, ``clean``, ...)
        and ``state``; once completed, its ``operation``, the data ``files`` it wrote (as
        ``WriteResult.files_written``), its ``index_files``, and for writes what happened to
        their ``keys`` (inserted, updated, stale, deleted, not found)."""
        return history(self._store, self._spec.options.merge_on_read)

    # --- writes ----------------------------------------------------------------------------

    def upsert(
        self,
        data: Rows,
        assigner_slots: int | None = None,
        partial: bool = False,
    ) -> WriteResult:
        """Inserts new keys and updates known ones, as one instant; records marked as
        deletes (``_hoodie_is_deleted`` true, or the table's ``delete_field`` holding its
        ``delete_marker``) delete their keys in the same instant. Per key the record of the
        largest ordering value wins, a delete alike, and a delete older than the row the
        table holds changes nothing.

        ``partial=True``: the records may carry only some fields (the key, partition and
        ordering fields, and those that changed); a known key keeps the values the table
        holds of the others, a new key gets nulls there. Every file holds whole rows (the
        writer reads the touched keys' rows from the file groups the index names), so
        every reader reads the result.

        A pyarrow Table is written in this process (by ``assigner_slots`` slots, each row
        going to the slot Spark would route it to; default one), and so are a pandas
        DataFrame, a pyarrow RecordBatch and any object with ``__arrow_c_stream__`` (a
        polars DataFrame, a DuckDB result), converted to one; a Spark DataFrame by Spark
        tasks and the assigner actors (``assigner_slots`` of them; default: the table's, else
        Spark's default parallelism).
        """
        return self._write(data, "upsert", assigner_slots, partial)

    def insert(self, data: Rows, assigner_slots: int | None = None) -> WriteResult:
        """Inserts rows whose keys the table has never had; any known key is an error."""
        return self._write(data, "insert", assigner_slots)

    def delete(self, keys: Rows, assigner_slots: int | None = None) -> WriteResult:
        """Deletes the rows of the given keys (key fields, plus partition fields)."""
        return self._write(keys, "delete", assigner_slots)

    def stream(
        self,
        streaming_df: DataFrame,
        checkpoint_location: str,
        trigger: dict[str, Any] | None = None,
        operation: str = "upsert",
        query_name: str | None = None,
        on_batch: Callable[[int, WriteResult], None] | None = None,
        partial: bool = False,
    ) -> StreamingQuery:
        """Writes a streaming DataFrame, each micro-batch one instant, exactly once.

        A micro-batch that Spark runs again after a crash (same batch id) is committed at
        most once: the commit records (stream, batch id), and a batch already on the
        timeline is skipped.

        Args:
            streaming_df: ``spark.readStream...`` DataFrame with the table's fields.
            checkpoint_location: Spark's checkpoint folder for the query.
            trigger: ``DataStreamWriter.trigger`` arguments, e.g. ``{"availableNow": True}``
                or ``{"processingTime": "10 seconds"}``.
            operation: ``upsert`` (whose records may be marked as deletes: a change
                stream, see :meth:`upsert`), ``insert`` or ``delete``.
            query_name: names the stream in commits (default: from the checkpoint folder).
            on_batch: called on the driver with (batch id, result) after each micro-batch.
            partial: the records carry only some fields; known keys keep the others
                (:meth:`upsert`).
        """
        _only_upserts_are_partial(operation, partial)
        self._refuse_if_closed("stream")
        stream_id = (
            query_name
            or hashlib.sha1(os.path.abspath(checkpoint_location).encode()).hexdigest()[:16]
        )
        writer = self._spark_writer()
        from dynbucket.write.file_scan import bare_file_stream
        from dynbucket.write.spark import StreamBatch

        file_stream = bare_file_stream(streaming_df)

        def batch(df: DataFrame, batch_id: int) -> None:
            result = writer.write(
                df,
                operation,
                self.assigner_slots,
                StreamBatch(stream_id, batch_id),
                file_stream,
                partial,
            )
            result = self._after(result)
            if on_batch is not None:
                on_batch(batch_id, result)

        query = streaming_df.writeStream.foreachBatch(batch).option(
            "checkpointLocation", checkpoint_location
        )
        if query_name:
            query = query.queryName(query_name)
        if trigger:
            query = query.trigger(**trigger)
        return query.start()

    def read(
        self,
        as_of: str | None = None,
        columns: Sequence[str] | None = None,
        meta_columns: bool = True,
    ) -> DataFrame:
        """The table as a Spark DataFrame (file slices merged in Spark tasks; a small table,
        files at most ``RuntimeConfig.driver_read_max_bytes``, read by this process and
        handed to Spark as Arrow: the same rows without a job of Python tasks)."""
        rt = self._runtime()
        limit = rt.config.driver_read_max_bytes
        return self.to_spark(rt.spark, as_of, columns, meta_columns, limit)

    def _write(
        self, data: Any, operation: str, slots: int | None, partial: bool = False
    ) -> WriteResult:
        _only_upserts_are_partial(operation, partial)
        self._refuse_if_closed(operation)
        if inputs.is_spark(data):
            slots = slots or self.assigner_slots
            result = self._spark_writer().write(data, operation, slots, partial=partial)
        else:
            rows = inputs.as_arrow(data, operation)
            result = self._writer().write(rows, operation, 1 if slots is None else slots, partial)
        return self._after(result)

    def _refuse_if_closed(self, what: str) -> None:
        if self._closed:
            raise TableClosedError(
                f"{what} on table {self._spec.name} at {self.uri}, which was closed "
                f"(Table.close()); open it again: Table.open({self.uri!r})"
            )

    def _services(self) -> ServiceRunner:
        """The runner of this table's services: those its writes make due (run after each
        write), and those its user asks for (one at a time per action)."""
        if self._runner is None:
            self._refuse_if_closed("a table service")
            self._runner = ServiceRunner(
                TableRef.of(self._store, self._spec),
                # On the cluster when this table has one (given, or found by a Spark
                # write); a table written in process keeps its services in process.
                cluster=lambda: RayTasks() if self.runtime or self._spark else None,
            )
        return self._runner

    def _after(self, result: WriteResult) -> WriteResult:
        """``result`` with the services its write made due, run (or started beside)."""
        ran = self._services().after(result.instant, result.written)
        return dataclasses.replace(result, services=ran) if ran else result

    def wait_for_services(self) -> None:
        """Waits for a compaction running beside the writes (``close`` waits too)."""
        if self._runner is not None:
            self._runner.wait()

    def _writer(self) -> LocalWriter:
        if self._local is None:
            self._local = LocalWriter(self._store, self._spec)
            self._local.compact = self._compact_logs
        return self._local

    def _compact_logs(self) -> None:
        """Every slice with logs compacted: what a write changing the schema of a
        merge-on-read table runs first (``write/instant.py``'s ``logs_ready_for``)."""
        self._services().compact()

    def _spark_writer(self) -> SparkWriter:
        # Spark's modules load with the first Spark write: `import dynbucket` stays light.
        from dynbucket.write.spark import SparkWriter

        if self._spark is None:
            rt = self._runtime()
            link = RayLink(rt.ray_address, rt.config.namespace)
            self._spark = SparkWriter(
                self._store,
                self._spec,
                link,
                rt.default_parallelism,
                rt.config.driver_write_max_bytes,
                rt.config.spark_one_stage_max_bytes,
            )
            self._spark.compact = self._compact_logs
        return self._spark

    def _runtime(self) -> Runtime:
        runtime = self.runtime or active_runtime()
        if runtime is None:
            raise RuntimeSetupError(
                "Spark writes and reads need a running dynbucket Runtime: "
                "`with Runtime() as rt: Table.open(uri, runtime=rt)`"
            )
        return runtime

    # --- services ------------------------------------------------------------------------

    def compact(
        self,
        partitions: Sequence[str] | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> ServiceResult:
        """Compacts every file slice with log files (of ``partitions``; default all), now
        (first finishing any compaction left pending). A large compaction's file groups
        run as parallel tasks: Ray tasks when the table has a cluster, else processes of
        this machine.

        Args:
            partitions: the partitions to compact (default: all).
            progress: told ``(file groups written, file groups planned)`` as the
                compaction goes, from any thread (``dynbucket.console.Progress`` prints it).
        """
        return self._services().compact(partitions, progress)

    def rescale(
        self, multiple: float, partitions: Sequence[str] | None = None, allow_shuffle: bool = False
    ) -> regroup.RegroupResult:
        """Multiplies the bucket count of a simple-bucket table's ``partitions`` (default:
        all) by ``multiple``, as one instant: with a whole multiple ``k`` each file group's
        rows are rewritten into its ``k`` new buckets (``b, b+N, ..., b+(k-1)N``) by the
        job that reads it; otherwise, with ``allow_shuffle=True``, each partition is
        rewritten whole. Readers see the old layout or the new, never a mix.

        Raises:
            ConfigError: not a simple-bucket table, or a multiple refused (the message
                says why and what to give).
        """
        self._refuse_if_closed("rescale")
        return regroup.rescale(self._store, self._current(), multiple, partitions, allow_shuffle)

    def rebalance(self) -> regroup.RegroupResult:
        """Splits each bucket of a consistent-hashing table over ``max_keys_per_bucket``
        into two ranges and merges adjacent buckets under ``min_keys_per_bucket``,
        rewriting only those file groups, as one instant.

        Raises:
            ConfigError: not a consistent-hashing table.
        """
        self._refuse_if_closed("rebalance")
        return regroup.rebalance(self._store, self._current())

    def compact_index(self, min_files: int | None = None) -> ServiceResult:
        """Merges the index files of each partition that has ``min_files`` of them."""
        return self._services().run(Action.INDEX_COMPACTION, Scope(min_files=min_files))

    def clean(self, retain: int | None = None) -> ServiceResult:
        """Removes file slices that none of the last ``retain`` instants reads."""
        return self._services().run(Action.CLEAN, Scope(retain=retain))

    def check(self) -> CheckReport:
        """Reads the whole table and reports what is wrong and what to do (changes
        nothing): instants, files, the snapshot, the index against the live rows, files
        no instant owns. ``report.healthy`` when nothing is."""
        return check(self._store)

    def rollback(self) -> list[str]:
        """Rolls back every pending instant a crashed writer left, and completes the cleans
        whose executor died (their removed files cannot come back); returns the ids rolled
        back."""
        return rollback(self._store, self._spec)


def _only_upserts_are_partial(operation: str, partial: bool) -> None:
    if not isinstance(partial, bool):
        raise ConfigError(f"partial={partial!r}: must be True or False")
    if partial and operation != "upsert":
        raise ConfigError(
            f"partial=True with operation={operation!r}: only an upsert keeps the values a "
            "key's records leave out; use operation='upsert'"
        )


def _snapshot_to_spark(
    snapshot: Snapshot,
    spark: SparkSession,
    columns: Sequence[str] | None,
    meta_columns: bool,
    driver_max_bytes: int = 0,
) -> DataFrame:
    """A snapshot as a Spark DataFrame: each task merges a share of the file slices, or,
    when they total at most ``driver_max_bytes``, this process reads them and Spark gets
    the rows as Arrow (a first job of Python tasks starts Spark's Python workers: seconds)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    refs = snapshot.slices()
    schema = snapshot.output_schema(columns, meta_columns)
    if sum(r.slice.size for r in refs) <= driver_max_bytes:
        rows = snapshot.to_arrow(columns, meta_columns, refs=refs)
        handed = arrow_frame(spark, rows.cast(schema))
        if handed is not None:
            return handed
    store, spec = snapshot.store, snapshot.spec
    slots = max(1, min(len(refs), spark.sparkContext.defaultParallelism * 4))
    taken = (snapshot.instant, snapshot.seen)

    def read(batches: Any) -> Any:
        for batch in batches:
            for ref in batch.column(0).to_pylist():
                table = read_ref(store, spec, refs[ref], columns, meta_columns, taken)
                yield from table.to_batches(max_chunksize=100_000)

    index = spark.range(len(refs), numPartitions=slots).selectExpr("cast(id as int) as ref")
    return index.mapInArrow(read, from_arrow_schema(schema))
