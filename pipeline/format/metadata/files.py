"""The metadata table's files as Hudi writes them: HFile base files, log files of HFile
data blocks and delete blocks, and the timeline files of an instant that writes them (a
deltacommit; a compaction, completed as a ``commit``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from dynbucket.format.hudi import commit_avro, hfile, log_file
from dynbucket.format.hudi.commit import WriteStat, commit_metadata
from dynbucket.format.hudi.instant_files import HudiAction
from dynbucket.format.metadata import records
from dynbucket.format.storage.store import TableStore, WriteBatch, temporary_name
from dynbucket.format.table.paths import HOODIE_DIR

#: The instant that initialises a metadata table's partitions (Hudi's).
INIT_INSTANT = "00000000000000000"
TIMELINE = f"{HOODIE_DIR}/timeline"

#: A file the metadata table's instant writes: (partition, file group, name, bytes, records).
File = tuple[str, str, str, bytes, int]
#: A file written, as an instant's record of it: (partition, file group, name, size, records).
Written = tuple[str, str, str, int, int]
#: A file group's records: keys ascending and their values (null: the key is deleted),
#: binary or dictionary-coded binary (a write's new keys share a few locations: the HFile
#: writer copies each value's bytes once, from its dictionary entry).
Changes = tuple[pa.BinaryArray, pa.Array]


def base_name(group: str, instant: str) -> str:
    return f"{group}_0-{instant}-0_{instant}.hfile"


def log_name(group: str, instant: str) -> str:
    return f".{group}_{instant}.log.1_0-{instant}-0"


def longest_name(group: str) -> int:
    """Bytes of the longest file name ``group`` takes: a file's hidden name while it is
    written (``TableStore``'s temporary names)."""
    instant = "0" * 17
    names = (base_name(group, instant), log_name(group, instant))
    return max(len(temporary_name(n).encode()) for n in names)


def arrays(entries: Mapping[str, bytes | None]) -> Changes:
    """``entries`` as Arrow, keys ascending (None: a delete's null value)."""
    ordered = sorted(entries)
    return (
        pa.array([k.encode() for k in ordered], pa.binary()),
        pa.array([entries[k] for k in ordered], pa.binary()),
    )


def base(partition: str, group: str, instant: str, entries: Changes, schema: str) -> File:
    """A base file of ``group`` written by ``instant``: an HFile of ``entries``."""
    keys, values = entries
    content = hfile.write_arrays(keys, values, {"schema": schema.encode()})
    return partition, group, base_name(group, instant), content, len(keys)


def log(partition: str, group: str, instant: str, changes: Changes, schema: str) -> File:
    """A log of ``changes``: an HFile data block of the records, a delete block of the
    keys gone (null values)."""
    keys, values = changes
    kept, gone = (keys, values), []
    if values.null_count:
        valid = pc.is_valid(values)
        kept = pc.filter(keys, valid), pc.filter(values, valid)
        gone = [k.decode() for k in pc.filter(keys, pc.invert(valid)).to_pylist()]
    blocks = []
    if len(kept[0]):
        content = hfile.write_arrays(*kept, {"schema": schema.encode()})
        blocks.append(log_file.hfile_data_block(content, instant, schema))
    if gone:
        blocks.append(log_file.delete_block(gone, [partition] * len(gone), ("int", 0), instant))
    return partition, group, log_name(group, instant), b"".join(blocks), len(keys)


def write(mdt: TableStore, files: Sequence[File]) -> list[Written]:
    """Writes ``files`` into the metadata table as one batch (one wait for the disk, not
    one per file group); what an instant records of them."""
    with WriteBatch(mdt) as batch:
        for partition, _group, name, data, _entries in files:
            batch.write_file(mdt.path(partition, name), data)
    return [(p, g, name, len(data), n) for p, g, name, data, n in files]


def complete(
    mdt: TableStore,
    instant: str,
    written: Sequence[Written],
    completion: str,
    schema: str | None = None,
    compaction: bool = False,
) -> None:
    """The timeline files of a metadata table's instant that wrote ``written``: a
    deltacommit (requested, inflight, completed), or a compaction (``compaction``:
    ``compaction.requested``, ``compaction.inflight``, a completed ``commit``, as Hudi
    completes a compaction)."""
    action = HudiAction.COMPACTION if compaction else HudiAction.DELTA_COMMIT
    for state in ("requested", "inflight"):
        mdt.write_atomic(mdt.path(TIMELINE, f"{instant}.{action}.{state}"), b"")
    stats = []
    for partition, group, name, size, entries in written:
        is_log = name.startswith(".")
        stats.append(
            WriteStat(
                partition=partition,
                file_id=group,
                path=f"{partition}/{name}",
                prev_commit=instant,
                num_writes=entries,
                num_inserts=0 if is_log else entries,
                num_updates=entries if is_log else 0,
                num_deletes=0,
                size=size,
                base_file="" if is_log else None,
                log_version=1 if is_log else None,
            )
        )
    operation = "compact" if compaction else "upsert_prepped"
    doc = commit_metadata(
        stats, operation, schema or records.schema_json(), {}, compacted=compaction
    )
    done = HudiAction.COMMIT if compaction else HudiAction.DELTA_COMMIT
    mdt.write_atomic(mdt.path(TIMELINE, f"{instant}_{completion}.{done}"), commit_avro.encode(doc))
