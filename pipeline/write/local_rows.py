"""Local rows and Spark DataFrames, without a Spark job: a small write whose DataFrame is
``spark.createDataFrame`` of local Python rows is read back in the driver, one whose plan
is rows the driver's JVM holds (a ``LocalRelation``) is converted to Arrow there
(:func:`relation_batches`); a small snapshot read by the driver is handed to Spark as
Arrow (:func:`arrow_frame`).

``createDataFrame(list, schema)`` pickles the rows into a parallelized collection in the
driver JVM; Spark cannot size such a plan (a ``LogicalRDD``), and reading it, even to
collect it, is a job whose tasks start Python workers to re-pickle the rows (a second or
more, then the write's own job). The rows are already here: the collection holds them,
pickled by this process. So the driver path (``write/driver.py``) takes them from it and
hashes the keys with ``base/keyhash.py``, as for a bare file scan (``write/file_scan.py``).

This is taken only when the DataFrame is exactly such rows; any doubt returns None and
Spark reads it as before:

1. The optimized plan is one ``LogicalRDD`` with the DataFrame's columns, over one narrow
   chain of RDDs down to a ``ParallelCollectionRDD``, whose one Python step is PySpark's
   own re-pickling (``RDD._reserialize``'s identity map, read from the step's pickled
   command): a ``createDataFrame`` of an RDD the user mapped has the user's function
   there, and its collection holds rows before that function.
2. The pickled rows are at most ``max_bytes``.
3. Every field is of an atomic type whose internal value converts to Arrow exactly as
   Spark's Arrow conversion gives it (strings, numbers, booleans, binary, decimals, dates,
   timestamps); nested types go to Spark.
"""

from __future__ import annotations

import io
import logging
import os
import tempfile
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from dynbucket.format.table.spec import TableSpec
from dynbucket.write.file_scan import arrow_schema, hashed_batches

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

log = logging.getLogger(__name__)

_COLLECTION = "org.apache.spark.rdd.ParallelCollectionRDD"
_PYTHON_RDD = "org.apache.spark.api.python.PythonRDD"
_RESERIALIZE = "RDD._reserialize.<locals>.<lambda>"


def read_local(
    df: DataFrame, spec: TableSpec, required: Sequence[str] | None, max_bytes: int
) -> list[pa.RecordBatch] | None:
    """The rows of ``df`` taken from the local collection it was created from, fitted to
    the table's schema and with ``_hash`` (as ``read_scanned`` gives a file scan's); None
    when they cannot be taken without Spark (module doc)."""
    try:
        plan = df._jdf.queryExecution().optimizedPlan()
        if plan.getClass().getSimpleName() != "LogicalRDD":
            return None
        if [a.name() for a in _seq(plan.output())] != list(df.columns):
            return None
        chain = _chain(plan.rdd())
        if chain is None:
            return None
        python_rdd, collection = chain
        deserializer = _reserialized_from(python_rdd)
        if deserializer is None:
            return None
        pickled = _pickled(collection, max_bytes)
        if pickled is None:
            return None
        rows = list(deserializer.load_stream(pickled))
        want = arrow_schema(df)
        table = _to_arrow(rows, df, want)
        if table is None:
            return None
        return hashed_batches(table, spec, required)
    except Exception as e:  # noqa: BLE001 - a plan or type this does not know: Spark reads it
        log.debug("taking the local rows in the driver failed; Spark collects", exc_info=e)
        return None


def _seq(seq: Any) -> list[Any]:
    it = seq.iterator()
    out = []
    while it.hasNext():
        out.append(it.next())
    return out


def _chain(rdd: Any) -> tuple[Any, Any] | None:
    """1. (the one PythonRDD, the ParallelCollectionRDD) of a narrow chain, else None."""
    pythons = []
    while rdd.getClass().getName() != _COLLECTION:
        if rdd.getClass().getName() == _PYTHON_RDD:
            pythons.append(rdd)
        deps = rdd.dependencies()
        if deps.size() != 1:
            return None
        rdd = deps.head().rdd()
    return (pythons[0], rdd) if len(pythons) == 1 else None


def _private(obj: Any, name: str) -> Any:
    field = obj.getClass().getDeclaredField(name)
    field.setAccessible(True)
    return field.get(obj)


def _reserialized_from(python_rdd: Any) -> Any | None:
    """1. The deserializer of the collection's elements, when the Python step is PySpark's
    re-pickling and nothing else (its command: the function, profiler, deserializer and
    serializer, pickled by this process when the DataFrame was created)."""
    from pyspark import cloudpickle

    command = _private(python_rdd, "func").command()
    raw = bytes(command.toArray(_byte_tag()))
    func, _, deserializer, _ = cloudpickle.loads(raw)
    if func.__qualname__ != "RDD.map.<locals>.func":
        return None
    inner = [c.cell_contents for c in func.__closure__ or ()]
    if len(inner) != 1 or getattr(inner[0], "__qualname__", None) != _RESERIALIZE:
        return None
    return deserializer


def _byte_tag() -> Any:
    from pyspark import SparkContext

    sc = SparkContext._active_spark_context
    if sc is None or sc._jvm is None:
        raise RuntimeError("no active SparkContext")
    return sc._jvm.scala.reflect.ClassTag.Byte()


def _pickled(collection: Any, max_bytes: int) -> io.BytesIO | None:
    """2. The collection's elements as the framed stream a PySpark deserializer reads."""
    from pyspark.serializers import write_int

    elements = _seq(_private(collection, "data"))
    out = io.BytesIO()
    for e in elements:
        data = bytes(e)
        if out.tell() + len(data) > max_bytes:
            return None
        write_int(len(data), out)
        out.write(data)
    out.seek(0)
    return out


def _to_arrow(rows: list[Any], df: DataFrame, want: pa.Schema) -> pa.Table | None:
    """3. Columns from the rows' internal values (what ``StructType.toInternal`` made:
    dates as days, timestamps as UTC microseconds), of exactly Spark's Arrow types."""
    from pyspark.sql import types as T

    n = len(df.schema.fields)
    if any(not isinstance(r, tuple) or len(r) != n for r in rows):
        return None
    columns = []
    for i, (spark_field, arrow_field) in enumerate(zip(df.schema.fields, want, strict=True)):
        values = [r[i] for r in rows]
        dt = spark_field.dataType
        if isinstance(dt, T.DateType):
            column = pa.array(values, pa.int32()).cast(arrow_field.type)
        elif isinstance(dt, (T.TimestampType, T.TimestampNTZType)):
            column = pa.array(values, pa.int64()).cast(arrow_field.type)
        elif isinstance(dt, (T.ArrayType, T.MapType, T.StructType, T.NullType)):
            return None
        elif isinstance(dt, T.BinaryType):
            column = pa.array([None if v is None else bytes(v) for v in values], arrow_field.type)
        else:
            column = pa.array(values, arrow_field.type)
        columns.append(column)
    return pa.table(columns, schema=want)


def relation_batches(df: DataFrame) -> list[pa.RecordBatch] | None:
    """The rows of ``df`` as Arrow batches when its optimized plan is rows the driver's JVM
    holds: a ``LocalRelation`` (PySpark's Arrow ``createDataFrame`` of a pandas DataFrame
    below ``spark.sql.execution.arrow.localRelationThreshold``, :func:`arrow_frame`'s
    snapshots, ``VALUES``; Spark's optimizer evaluates a projection of it, the key hash
    included, in the driver). Spark's own converter (the one a collect's tasks run) turns
    them to Arrow in the JVM, which writes the stream to a local file this process reads:
    no job. A collect of 20k such rows is a job of 0.13-0.44 s on 2 cores, most of a small
    write's time; this 0.05-0.09 s. None when the plan is anything else, or Spark's
    internals are not as in 3.5 (then Spark collects it)."""
    try:
        plan = df._jdf.queryExecution().optimizedPlan()
        if plan.getClass().getSimpleName() != "LocalRelation":
            return None
        spark = df.sparkSession
        jvm: Any = spark._jvm
        conf = spark._jsparkSession.sessionState().conf()
        arrow = jvm.org.apache.spark.sql.execution.arrow
        converters = getattr(getattr(arrow, "ArrowConverters$"), "MODULE$")
        zone, schema = conf.sessionLocalTimeZone(), plan.schema()
        with tempfile.TemporaryDirectory(prefix="dynbucket-rows-") as folder:
            path = os.path.join(folder, "rows.arrows")
            out = jvm.java.io.FileOutputStream(path)
            try:
                writer = arrow.ArrowBatchStreamWriter(schema, out, zone, True)
                writer.writeBatches(
                    converters.toBatchIterator(
                        plan.data().iterator(),
                        schema,
                        conf.arrowMaxRecordsPerBatch(),
                        zone,
                        True,
                        None,
                    )
                )
                writer.end()
            finally:
                out.close()
            with pa.ipc.open_stream(path) as reader:
                return [b for b in reader if b.num_rows]
    except Exception as e:  # noqa: BLE001 - another Spark's internals: Spark collects it
        log.debug("the driver's rows were not converted here; Spark collects them", exc_info=e)
        return None


def arrow_frame(spark: Any, table: pa.Table) -> DataFrame | None:
    """``table`` as a Spark DataFrame of the same rows, handed over as Arrow (what PySpark's
    Arrow ``createDataFrame`` of pandas does, without pandas: every type stays as it is):
    the JVM reads the batches, one partition each, and no Python worker takes part. None
    when a type has no Spark equivalent or Spark refuses it (then read with tasks)."""
    from pyspark.sql import DataFrame as SparkFrame
    from pyspark.sql.pandas.serializers import ArrowStreamSerializer
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    try:
        schema = from_arrow_schema(table.schema)
        table = table.cast(to_arrow_schema(schema))
        if table.num_rows == 0:
            return spark.createDataFrame([], schema)
        batches = table.combine_chunks().to_batches(max_chunksize=100_000)
        sc = spark.sparkContext
        jvm = sc._jvm

        def from_file(path: str) -> Any:
            return jvm.PythonSQLUtils.readArrowStreamFromFile(path)

        def from_server() -> Any:
            return jvm.ArrowIteratorServer()

        batches_in_jvm = sc._serialize_to_jvm(
            batches, ArrowStreamSerializer(), from_file, from_server
        )
        jdf = jvm.PythonSQLUtils.toDataFrame(batches_in_jvm, schema.json(), spark._jsparkSession)
        df = SparkFrame(jdf, spark)
        df._schema = schema
        return df
    except Exception as e:  # noqa: BLE001 - a type Spark does not take: tasks read it
        log.debug("handing the rows to Spark as Arrow failed; Spark tasks read them", exc_info=e)
        return None
