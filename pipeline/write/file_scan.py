"""Small writes whose DataFrame is a bare scan of Parquet files: read in the driver, no job.

Every Spark job costs 0.1-0.2 s on these machines, even one that collects a single row (a
plain local-mode Spark job costs 0.1 s); reading a 40k-row Parquet file with pyarrow takes
3 ms. A streaming micro-batch of a file source, or ``spark.read.parquet(...)``, is exactly
the rows of its files, so the driver path (``write/driver.py``) reads those files itself and
hashes the keys with ``base/keyhash.py`` (XXH64, equal to Spark's ``xxhash64``).

This is taken only when nothing can differ from what Spark would read; any doubt returns
None and Spark collects as before:

1. The plan is a bare scan: the optimized plan is one Parquet ``LogicalRelation`` (a batch
   read), or the stream the micro-batch comes from is one Parquet ``StreamingRelation``
   (checked once per stream by :func:`bare_file_stream`: no filter, projection or join).
2. The files are those of Spark's own scan (its ``FileScanRDD``, in its order, so ties
   between duplicate keys resolve as on the Spark path), each read whole by one piece of
   the scan or by consecutive pieces in the file's order (Spark splits a file larger than
   its split size, 4 MiB at least: the rows come in the file's order then too), local,
   without partition
   values from the folder names, and not written by a Spark that rebased old dates.
3. Each file has the DataFrame's fields, by name (not with Spark matching columns by field
   id), with exactly the Arrow types Spark's would convert to (Spark reads some types
   differently: INT96 or millisecond timestamps, unsigned ints, binary as string; those go
   to Spark).
4. The key fields are of types ``keyhash`` hashes as Spark does.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlparse

import pyarrow as pa
import pyarrow.parquet as pq

from dynbucket.base.columns import HASH
from dynbucket.base.keyhash import key_hashes
from dynbucket.format.records.incoming import conform
from dynbucket.format.table.spec import TableSpec

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

_PARQUET = "org.apache.spark.sql.execution.datasources.parquet.ParquetFileFormat"
_SCAN_RDD = "org.apache.spark.sql.execution.datasources.FileScanRDD"
_FIELD_IDS = "spark.sql.parquet.fieldId.read.enabled"
#: File metadata keys of a Spark that wrote dates or INT96 in the legacy hybrid calendar.
_LEGACY_KEYS = (b"org.apache.spark.legacyDateTime", b"org.apache.spark.legacyINT96")


def bare_file_stream(streaming_df: DataFrame) -> bool:
    """Whether a streaming DataFrame is one Parquet file source with nothing on top."""
    try:
        plan = streaming_df._jdf.queryExecution().logical()
        return bool(
            plan.getClass().getSimpleName() == "StreamingRelation"
            and plan.dataSource().providingClass().getName() == _PARQUET
        )
    except Exception:  # not a plan this knows: let Spark read it
        return False


def read_scanned(
    df: DataFrame, spec: TableSpec, required: Sequence[str] | None, bare_stream: bool = False
) -> list[pa.RecordBatch] | None:
    """The rows of ``df`` read from its Parquet files, fitted to the table's schema and with
    ``_hash``, as :func:`~dynbucket.write.driver.collect_hashed` would return them
    after ``conform_spark``; None when they cannot be read without Spark (module doc).

    Args:
        bare_stream: ``df`` is a micro-batch of a stream :func:`bare_file_stream` accepted.
    """
    try:
        if str(df.sparkSession.conf.get(_FIELD_IDS, "false")).lower() == "true":
            return None  # Spark matches columns by field id, pyarrow by name
        qe = df._jdf.queryExecution()
        if not (bare_stream or _bare_relation(qe.optimizedPlan())):
            return None
        files = _scanned_files(qe.toRdd())
        if files is None:
            return None
        want = arrow_schema(df)
        table = _read(files, want)
        if table is None:
            return None
        return hashed_batches(table, spec, required)
    except Exception as e:  # noqa: BLE001 - e.g. a key type keyhash does not hash (Spark's
        # xxhash64 does), or any surprise: Spark reads it as before
        log.debug("reading the scanned files in the driver failed; Spark collects", exc_info=e)
        return None


def hashed_batches(
    table: pa.Table, spec: TableSpec, required: Sequence[str] | None
) -> list[pa.RecordBatch]:
    """``table`` (the DataFrame's rows, of Spark's Arrow types) fitted to the table's
    schema as ``conform_spark`` fits the DataFrame, with ``_hash`` as Spark's ``xxhash64``
    gives it (raises when a key type is one ``keyhash`` does not hash)."""
    table = conform(table, spec, required)
    hashes = key_hashes(table, spec.record_key)
    return [b for b in table.append_column(HASH, pa.array(hashes)).to_batches() if b.num_rows]


def _bare_relation(plan: Any) -> bool:
    """1. One Parquet relation, nothing above it."""
    if plan.getClass().getSimpleName() != "LogicalRelation":
        return False
    relation = plan.relation()
    return bool(
        relation.getClass().getSimpleName() == "HadoopFsRelation"
        and relation.fileFormat().getClass().getName() == _PARQUET
        and relation.partitionSchema().isEmpty()
    )


def _scanned_files(rdd: Any) -> list[str] | None:
    """2. The local paths Spark's file scan reads, in its order; None if the scan is not one
    narrow chain down to a ``FileScanRDD``, a file carries partition values, or Spark split
    a file into pieces that are not read one after the other from its start to its end
    (Spark orders pieces by size, so pieces of two split files may interleave: the rows of
    the files would then not come one file after the other)."""
    while rdd.getClass().getName() != _SCAN_RDD:
        deps = rdd.dependencies()
        if deps.size() != 1:
            return None
        rdd = deps.head().rdd()
    paths: list[str] = []
    end = 0  # where the last piece of ``paths[-1]`` ends
    partitions = rdd.filePartitions()
    for i in range(partitions.size()):
        for piece in partitions.apply(i).files():
            if piece.partitionValues().numFields() != 0:
                return None
            uri = piece.filePath().toString()
            if not uri.startswith("file:"):
                return None
            path = unquote(urlparse(uri).path)
            start, length = int(piece.start()), int(piece.length())
            if paths and path == paths[-1] and start == end:
                end = start + length  # the next piece of the file being read
                continue
            if path in paths or start != 0 or (paths and end != os.path.getsize(paths[-1])):
                return None  # a piece out of order, or the file before it not read whole
            paths.append(path)
            end = length
    if paths and end != os.path.getsize(paths[-1]):
        return None
    return paths


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The Arrow types Spark's Arrow conversion gives the DataFrame's fields."""
    from pyspark.sql.pandas.types import to_arrow_type

    return pa.schema([(f.name, to_arrow_type(f.dataType)) for f in df.schema.fields])


def _read(paths: list[str], want: pa.Schema) -> pa.Table | None:
    """3. The files' columns of ``want``, if every file has them with exactly those types."""
    tables = []
    for path in paths:
        file = pq.ParquetFile(path)
        schema = file.schema_arrow
        if any(key in (schema.metadata or {}) for key in _LEGACY_KEYS):
            return None
        for field in want:
            i = schema.get_field_index(field.name)
            if i < 0 or not schema.field(i).type.equals(field.type):
                return None
        tables.append(file.read(columns=want.names))
    if not tables:
        return want.empty_table()
    return pa.concat_tables(tables).cast(want)
