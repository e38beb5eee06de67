"""Hostile and careless input, as one table: what a user may hand dynbucket, and what must
come back (the error class and the words of its message, or acceptance).

Used by the in-process suite (``tests/unit/pipeline/test_hostile_input.py``) and the Spark
suite (``tests/integration/write/test_hostile_input.py``): both write paths must answer each
input case the same way, and write nothing when they refuse it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from dynbucket.base.errors import (
    ConfigError,
    DynBucketError,
    InvalidInputError,
    InvalidPartitionValueError,
    NullKeyError,
    SchemaMismatchError,
)

#: The table of the input cases: a key, a partition field, an ordering field, a field that
#: must not be null and one that may.
SCHEMA = pa.schema(
    [
        pa.field("id", pa.string()),
        pa.field("day", pa.string()),
        pa.field("ts", pa.int64()),
        pa.field("qty", pa.int64(), nullable=False),
        pa.field("note", pa.string()),
    ]
)
KEY, PARTITION, ORDERING = "id", "day", "ts"
GOOD: dict[str, tuple[pa.DataType, list[Any]]] = {
    "id": (pa.string(), ["a", "b"]),
    "day": (pa.string(), ["d1", "d2"]),
    "ts": (pa.int64(), [1, 2]),
    "qty": (pa.int64(), [5, 6]),
    "note": (pa.string(), ["x", None]),
}


@dataclass(frozen=True)
class InputCase:
    """Records handed to a write: ``changes`` replace fields of :data:`GOOD` (None drops one)."""

    name: str
    changes: dict[str, tuple[pa.DataType, list[Any]] | None]
    error: type[DynBucketError] | None
    """The error both paths raise (None: both accept the records)."""
    message: str = ""
    """A regular expression the message matches (it names the field and value)."""
    operation: str = "upsert"
    """A table's write method, or ``partial upsert`` (``upsert(..., partial=True)``)."""
    rows: int = 2
    """Live rows after an accepted write."""

    def data(self) -> pa.Table:
        fields = {**GOOD, **self.changes}
        return pa.table(
            {
                name: pa.array(values, type_)
                for name, spec in fields.items()
                if spec is not None
                for type_, values in [spec]
            }
        )


def write(table: Any, operation: str, data: Any) -> Any:
    """The case's write of ``data`` into ``table``."""
    if operation == "partial upsert":
        return table.upsert(data, partial=True)
    return getattr(table, operation)(data)


LONG = "x" * 300
INPUT_CASES = [
    # Accepted: the same types, widening types, values that need escaping.
    InputCase("same types", {}, None),
    InputCase("int32 widens to int64", {"qty": (pa.int32(), [1, 2])}, None),
    InputCase("large strings are strings", {"note": (pa.large_string(), ["p", "q"])}, None),
    InputCase(
        "dictionary strings are strings",
        {"note": (pa.dictionary(pa.int32(), pa.string()), ["p", "p"])},
        None,
    ),
    InputCase("a field of nulls may be left null", {"note": (pa.null(), [None, None])}, None),
    InputCase("partition values Spark escapes", {"day": (pa.string(), ["a=b", "50%?#"])}, None),
    InputCase(
        "unicode keys and partitions",
        {"id": (pa.string(), ["ключ", "🔑"]), "day": (pa.string(), ["日", "été"])},
        None,
    ),
    InputCase("a key of 10,000 characters", {"id": (pa.string(), ["k" * 10_000, "b"])}, None),
    InputCase(
        "one key twice: the larger ordering value wins",
        {"id": (pa.string(), ["a", "a"]), "day": (pa.string(), ["d1", "d1"])},
        None,
        rows=1,
    ),
    # Types that do not fit.
    InputCase(
        "a string of digits is not an int",
        {"qty": (pa.string(), ["5", "6"])},
        SchemaMismatchError,
        "field 'qty' has type string; the table has int64",
    ),
    InputCase(
        "an int is not a string",
        {"id": (pa.int64(), [42, 43])},
        SchemaMismatchError,
        "field 'id' has type int64; the table has string",
    ),
    InputCase(
        "a double promotes an int field (schema evolution)",
        {"qty": (pa.float64(), [5.0, 6.0])},
        None,
    ),
    InputCase(
        "a double does not narrow the ordering field",
        {"ts": (pa.float64(), [5.0, 6.0])},
        SchemaMismatchError,
        "field 'ts' has type double; the table has int64, and a key, partition or "
        "ordering field keeps its type",
    ),
    InputCase(
        "uint64 does not fit int64",
        {"qty": (pa.uint64(), [5, 6])},
        SchemaMismatchError,
        # Spark has no unsigned type: it reads uint64 from Parquet as a decimal.
        r"field 'qty' has type (uint64|decimal128\(20, 0\)); the table has int64",
    ),
    InputCase(
        "a boolean is not an int",
        {"ts": (pa.bool_(), [True, False])},
        SchemaMismatchError,
        "field 'ts' has type bool",
    ),
    InputCase(
        "an extra field is a new column (schema evolution)", {"extra": (pa.int64(), [1, 2])}, None
    ),
    InputCase(
        "a missing field",
        {"qty": None},
        SchemaMismatchError,
        r"\['qty'\] of the table schema are missing",
    ),
    InputCase(
        "a nullable field left out (an upsert carries every field)",
        {"note": None},
        SchemaMismatchError,
        r"\['note'\] of the table schema are missing",
    ),
    # Keys, ordering values, fields that must not be null.
    InputCase(
        "a null key",
        {"id": (pa.string(), ["a", None])},
        NullKeyError,
        "record key field 'id' is null in 1 row",
    ),
    InputCase(
        "a null ordering value",
        {"ts": (pa.int64(), [1, None])},
        InvalidInputError,
        "ordering field 'ts' is null in 1 row",
    ),
    InputCase(
        "a null in a field that may not be null",
        {"qty": (pa.int64(), [None, 6])},
        InvalidInputError,
        "field 'qty', which .* may not be null, is null in 1 row",
    ),
    # Partition values that cannot name a folder.
    InputCase(
        "a null partition value",
        {"day": (pa.string(), ["d1", None])},
        InvalidPartitionValueError,
        "partition field 'day' is null in 1 row",
    ),
    InputCase(
        "an empty partition value",
        {"day": (pa.string(), ["d1", ""])},
        InvalidPartitionValueError,
        "partition field 'day' has value ''",
    ),
    InputCase(
        "a partition value with '/'",
        {"day": (pa.string(), ["d1", "x/y"])},
        InvalidPartitionValueError,
        "'x/y'",
    ),
    InputCase(
        "a partition value leaving the table",
        {"day": (pa.string(), ["d1", "../x"])},
        InvalidPartitionValueError,
        "'../x'",
    ),
    InputCase(
        "a partition value with a control character",
        {"day": (pa.string(), ["d1", "a\nb"])},
        InvalidPartitionValueError,
        "control character",
    ),
    InputCase(
        "a partition value longer than a folder name may be",
        {"day": (pa.string(), ["d1", LONG])},
        InvalidPartitionValueError,
        "partition field 'day' has a value of 300 characters.*255 bytes",
    ),
    InputCase(
        "a partition value that grows too long when escaped",
        {"day": (pa.string(), ["d1", "%" * 90])},
        InvalidPartitionValueError,
        "partition field 'day' has a value of 90 characters.*274 bytes",
    ),
    # Operations.
    InputCase(
        "a delete without its partition field",
        {"day": None, "ts": None, "qty": None, "note": None},
        SchemaMismatchError,
        r"\['day'\] of the table schema are missing",
        operation="delete",
    ),
    InputCase("a delete of keys the table never had", {}, None, operation="delete", rows=0),
    InputCase(
        "an insert of a key the table has",
        {"id": (pa.string(), ["old", "new"]), "day": (pa.string(), ["d0", "d0"])},
        InvalidInputError,
        r"insert: 1 key\(s\) already exist.*use upsert",
        operation="insert",
    ),
    # Deletes marked in the records (a change batch).
    InputCase(
        "a change batch: an upsert and a delete of a key never had",
        {"_hoodie_is_deleted": (pa.bool_(), [False, True]), "qty": (pa.int64(), [5, None])},
        None,
        rows=1,
    ),
    InputCase(
        "a delete marker that is not a boolean",
        {"_hoodie_is_deleted": (pa.string(), ["false", "true"])},
        SchemaMismatchError,
        "field '_hoodie_is_deleted' has type string.*cast it to bool",
    ),
    InputCase(
        "a marked delete without an ordering value",
        {"_hoodie_is_deleted": (pa.bool_(), [False, True]), "ts": (pa.int64(), [1, None])},
        InvalidInputError,
        "ordering field 'ts' is null in 1 row",
    ),
    InputCase(
        "an insert of records marked as deletes",
        {"_hoodie_is_deleted": (pa.bool_(), [False, True])},
        InvalidInputError,
        r"insert: 1 record\(s\) are marked as deletes.*upsert",
        operation="insert",
    ),
    # Partial upserts: the key, partition and ordering fields, and some others.
    InputCase(
        "a partial upsert of a known key",
        {"id": (pa.string(), ["old", "new"]), "day": (pa.string(), ["d0", "d0"]), "note": None},
        None,
        operation="partial upsert",
        rows=1,
    ),
    InputCase(
        "a partial upsert without its ordering field",
        {"ts": None, "note": None},
        SchemaMismatchError,
        r"\['ts'\] of the table schema are missing: give them",
        operation="partial upsert",
    ),
    InputCase(
        "a partial upsert of new keys without a field that may not be null",
        {"qty": None},
        InvalidInputError,
        "field 'qty', which the table's schema says may not be null, is not in the "
        r"records of a partial upsert, and new keys are among them \(e.g. \[\{'id'",
        operation="partial upsert",
    ),
    InputCase(
        "an upsert without a field",
        {"note": None},
        SchemaMismatchError,
        r"\['note'\] of the table schema are missing.*partial=True.*"
        "hoodie.write.set.null.for.missing.columns",
    ),
]


@dataclass(frozen=True)
class CreateCase:
    """A table definition handed to ``Table.create``: ``kwargs`` change the good one."""

    name: str
    kwargs: dict[str, Any] = field(default_factory=dict)
    error: type[DynBucketError] | None = None
    message: str = ""
    schema: pa.Schema = SCHEMA


def _with(name: str, type_: pa.DataType | None = None) -> pa.Schema:
    return SCHEMA.append(pa.field(name, type_ or pa.string()))


CREATE_CASES = [
    CreateCase("a good definition"),
    CreateCase(
        "a partition field leaving the table",
        {"partition_by": "../evil"},
        ConfigError,
        r"field '\.\./evil'.*letters, digits and '_'",
        _with("../evil"),
    ),
    CreateCase(
        "a partition field with '/'",
        {"partition_by": "a/b"},
        ConfigError,
        r"field 'a/b'",
        _with("a/b"),
    ),
    CreateCase(
        "a partition field with '='",
        {"partition_by": "x=y"},
        ConfigError,
        r"field 'x=y'",
        _with("x=y"),
    ),
    CreateCase(
        "a partition field hidden from readers",
        {"partition_by": "_day"},
        ConfigError,
        r"partition field '_day'.*'_'",
        _with("_day"),
    ),
    CreateCase(
        "a field name Hudi's Avro schema refuses",
        {},
        ConfigError,
        r"field 'unit price'.*letters, digits and '_'",
        _with("unit price", pa.int64()),
    ),
    CreateCase("a field name starting with a digit", {}, ConfigError, r"field '1st'", _with("1st")),
    CreateCase("no record key", {"record_key": []}, ConfigError, "record_key is empty"),
    CreateCase(
        "a record key not in the schema",
        {"record_key": "nope"},
        ConfigError,
        r"record_key field\(s\) \['nope'\] are not in the schema",
    ),
    CreateCase(
        "a partition field not in the schema",
        {"partition_by": "zz"},
        ConfigError,
        r"partition_by field\(s\) \['zz'\]",
    ),
    CreateCase(
        "an ordering field not in the schema",
        {"ordering_field": "zz"},
        ConfigError,
        "ordering_field='zz'",
    ),
    CreateCase(
        "an ordering field without an order",
        {"ordering_field": "flag"},
        ConfigError,
        "ordering_field='flag' has type bool",
        _with("flag", pa.bool_()),
    ),
    CreateCase(
        "a partition field of floats",
        {"partition_by": "price"},
        SchemaMismatchError,
        "partition field 'price' has type double",
        _with("price", pa.float64()),
    ),
    CreateCase(
        "a field name dynbucket reserves",
        {},
        SchemaMismatchError,
        r"\['_bucket'\] use names dynbucket reserves",
        _with("_bucket", pa.int32()),
    ),
    CreateCase(
        "a Hudi meta field name",
        {},
        SchemaMismatchError,
        "_hoodie_commit_time",
        _with("_hoodie_commit_time"),
    ),
    CreateCase(
        "nanosecond timestamps",
        {},
        ConfigError,
        r"field 'at' has type timestamp\[ns\]",
        _with("at", pa.timestamp("ns")),
    ),
    CreateCase(
        "a table name Hudi refuses", {"name": "my-table"}, ConfigError, "table name 'my-table'"
    ),
]
