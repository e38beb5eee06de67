"""Partition paths made from a time, as Hudi's ``TimestampBasedKeyGenerator`` makes them: a
table Hudi wrote with it (``hoodie.keygen.timebased.*``) is adopted and written on with the
same paths (``2024/01/15/10`` from ``1705315500000``, or from ``2024-01-15T10:05:00.000Z``).

The path is not the field's value, so readers take such a field from the files (Hudi
writes it there), never from the path (``TableSpec.path_fields``).
"""

from __future__ import annotations

import datetime as dt
import re
import zoneinfo
from collections.abc import Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.base.errors import ConfigError, InvalidPartitionValueError

PREFIX = "hoodie.keygen.timebased."
#: Timestamp types read here: milliseconds or seconds since the epoch, or text.
TYPES = ("EPOCHMILLISECONDS", "UNIX_TIMESTAMP", "DATE_STRING")
#: Java date-pattern letters -> strftime / strptime directives.
_JAVA = {
    "yyyy": "%Y",
    "yy": "%y",
    "MM": "%m",
    "dd": "%d",
    "HH": "%H",
    "hh": "%I",
    "mm": "%M",
    "ss": "%S",
    "SSS": "%f",
    "a": "%p",
    "Z": "%z",
    "XXX": "%z",
    "X": "%z",
}
_TOKEN = re.compile(r"'[^']*'|yyyy|yy|MM|dd|HH|hh|mm|ss|SSS|XXX|X|Z|a")


def java_format(pattern: str) -> str:
    """A Java ``SimpleDateFormat`` pattern as a strftime/strptime format."""
    out, pos = [], 0
    for m in _TOKEN.finditer(pattern):
        out.append(pattern[pos : m.start()].replace("%", "%%"))
        token = m.group()
        out.append(token[1:-1] if token.startswith("'") else _JAVA[token])
        pos = m.end()
    out.append(pattern[pos:].replace("%", "%%"))
    return "".join(out)


@dataclass(frozen=True)
class TimestampPartitioning:
    """How a time field names partitions (Hudi's ``hoodie.keygen.timebased.*`` options)."""

    timestamp_type: str
    """``EPOCHMILLISECONDS``, ``UNIX_TIMESTAMP`` or ``DATE_STRING`` (the field's values)."""
    output_format: str
    """The path's Java date pattern (``yyyy/MM/dd/HH``)."""
    input_format: str = ""
    """``DATE_STRING``: the values' Java date pattern."""
    timezone: str = "UTC"
    """The zone the path's time is told in."""

    def __post_init__(self) -> None:
        if self.timestamp_type not in TYPES:
            raise ConfigError(
                f"{PREFIX}timestamp.type={self.timestamp_type!r}: partition paths are made "
                f"here from {', '.join(TYPES)} values only"
            )
        if self.timestamp_type == "DATE_STRING" and not self.input_format:
            raise ConfigError(f"{PREFIX}input.dateformat is needed for DATE_STRING values")

    @classmethod
    def from_properties(cls, props: Mapping[str, str]) -> TimestampPartitioning:
        """From a table's properties (Hudi 0.x kept the type with the writer, not the
        table: an input pattern there says the values are text)."""
        kind = props.get(f"{PREFIX}timestamp.type", "")
        if not kind and props.get(f"{PREFIX}input.dateformat"):
            kind = "DATE_STRING"
        return cls(
            kind,
            props.get(f"{PREFIX}output.dateformat", ""),
            props.get(f"{PREFIX}input.dateformat", ""),
            props.get(f"{PREFIX}output.timezone") or props.get(f"{PREFIX}timezone") or "UTC",
        )

    def paths(self, name: str, column: pa.Array | pa.ChunkedArray) -> pa.Array:
        """The partition path of each value of the field ``name``.

        Raises:
            InvalidPartitionValueError: a value is null or not a time of the type.
        """
        if isinstance(column, pa.ChunkedArray):
            column = column.combine_chunks()
        if column.null_count:
            raise InvalidPartitionValueError(
                f"partition field {name!r} is null in {column.null_count} row(s); its "
                "partition path is made from its time: give every row one"
            )
        zone = zoneinfo.ZoneInfo(self.timezone)
        out = java_format(self.output_format)
        encoded = pc.dictionary_encode(column)
        texts = [
            self._time(name, v).astimezone(zone).strftime(out)
            for v in encoded.dictionary.to_pylist()
        ]
        return pc.take(pa.array(texts, pa.string()), encoded.indices)

    def _time(self, name: str, value: object) -> dt.datetime:
        try:
            if self.timestamp_type == "DATE_STRING":
                parsed = dt.datetime.strptime(str(value), java_format(self.input_format))
                return parsed if parsed.tzinfo else parsed.replace(tzinfo=dt.UTC)
            scale = 1000 if self.timestamp_type == "EPOCHMILLISECONDS" else 1
            return dt.datetime.fromtimestamp(int(str(value)) / scale, dt.UTC)
        except (TypeError, ValueError, OverflowError) as e:
            raise InvalidPartitionValueError(
                f"partition field {name!r} has value {value!r}, not a {self.timestamp_type} "
                f"time ({PREFIX}timestamp.type): {e}"
            ) from e
