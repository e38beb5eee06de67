"""Hudi 1.x's archived timeline (timeline layout 2): an LSM tree of Parquet files under
``.hoodie/timeline/history/``, what archival writes for a table of version 8 or 9 (version
6 keeps Avro log files: ``archived.py``).

* ``<min instant>_<max instant>_<layer>.parquet``: one record per archived instant
  (``HoodieLSMTimelineInstant``: instant time, completion time, action, the completed
  file's bytes as ``metadata``, the requested file's as ``plan``, version 1);
* ``manifest_<N>``: JSON naming the files of snapshot ``N`` (``{"files": [{"fileName",
  "fileLen"}]}``);
* ``_version_``: the latest ``N``, written last (a reader follows it, else the largest
  manifest).

Each archival adds one layer-0 file and a manifest naming the files in force. As Hudi's
writers do, once a layer holds ``MERGE_FILES`` files its oldest ``MERGE_FILES`` are merged
into one file of the next layer (``<min>_<max>_<layer + 1>.parquet``), so that a table
archived every few writes for months keeps a few dozen files, not one per archival. After
a merge, manifests and files that none of the ``KEEP_VERSIONS`` latest snapshots names are
removed (a reader that followed an older ``_version_`` has had three snapshots'
time to finish; between merges, appends read and remove nothing more).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

import pyarrow as pa

from dynbucket.format.storage.store import TableStore

HISTORY_DIR = ".hoodie/timeline/history"
VERSION_FILE = "_version_"
_MANIFEST = re.compile(r"^manifest_(\d+)$")
_LAYER_FILE = re.compile(r"^(\d+)_(\d+)_(\d+)\.parquet$")
#: Files of one layer merged into one of the next (Hudi's
#: ``hoodie.timeline.compaction.batch.size``).
MERGE_FILES = 10
#: Snapshots whose files and manifests are kept (older ones are removed).
KEEP_VERSIONS = 3
#: The Avro schema Hudi reads the files by (kept in each file's footer, as Hudi's
#: writer keeps it).
AVRO_SCHEMA = json.dumps(
    {
        "type": "record",
        "name": "HoodieLSMTimelineInstant",
        "namespace": "org.apache.hudi.avro.model",
        "fields": [
            {"name": "instantTime", "type": ["null", "string"], "default": None},
            {"name": "completionTime", "type": ["null", "string"], "default": None},
            {"name": "action", "type": ["null", "string"], "default": None},
            {"name": "metadata", "type": ["null", "bytes"], "default": None},
            {"name": "plan", "type": ["null", "bytes"], "default": None},
            {"name": "version", "type": "int", "default": 1},
        ],
    }
)
SCHEMA = pa.schema(
    [
        ("instantTime", pa.string()),
        ("completionTime", pa.string()),
        ("action", pa.string()),
        ("metadata", pa.binary()),
        ("plan", pa.binary()),
        pa.field("version", pa.int32(), nullable=False),
    ],
    metadata={"parquet.avro.schema": AVRO_SCHEMA},
)


@dataclass(frozen=True)
class Entry:
    """One archived instant."""

    instant: str
    completion: str
    action: str
    """As its completed file names it (a compaction: ``commit``)."""
    metadata: bytes
    plan: bytes = b""


def latest_version(store: TableStore) -> int:
    """The latest snapshot ``N`` (0: none yet)."""
    try:
        return int(store.read_bytes(store.path(HISTORY_DIR, VERSION_FILE)).decode().strip())
    except (FileNotFoundError, ValueError):
        found = [_MANIFEST.match(i.base_name) for i in store.list_files(store.path(HISTORY_DIR))]
        return max((int(m.group(1)) for m in found if m), default=0)


def files_of(store: TableStore, version: int) -> list[dict[str, object]]:
    """The file entries manifest ``version`` names ([] for 0)."""
    if version == 0:
        return []
    doc = json.loads(store.read_bytes(store.path(HISTORY_DIR, f"manifest_{version}")))
    return list(doc.get("files", []))


def append(store: TableStore, entries: list[Entry]) -> str:
    """Archives ``entries`` (oldest first) as a new layer-0 file and a new snapshot;
    returns the file's name."""
    rows = pa.table(
        {
            "instantTime": [e.instant for e in entries],
            "completionTime": [e.completion for e in entries],
            "action": [e.action for e in entries],
            "metadata": [e.metadata for e in entries],
            "plan": [e.plan or None for e in entries],
            "version": pa.array([1] * len(entries), pa.int32()),
        },
        schema=SCHEMA,
    )
    name = f"{entries[0].instant}_{entries[-1].instant}_0.parquet"
    size = store.write_parquet(store.path(HISTORY_DIR, name), rows)
    version = latest_version(store)
    files = [f for f in files_of(store, version) if f.get("fileName") != name]
    files.append({"fileName": name, "fileLen": size})
    unmerged = len(files)
    files = _merged(store, files)
    manifest = json.dumps({"files": sorted(files, key=lambda f: str(f["fileName"]))}, indent=2)
    store.write_atomic(store.path(HISTORY_DIR, f"manifest_{version + 1}"), manifest.encode())
    store.write_atomic(store.path(HISTORY_DIR, VERSION_FILE), str(version + 1).encode())
    if len(files) < unmerged:  # only a merge takes files out of the snapshot
        _clean(store, version + 1)
    return name


def _merged(store: TableStore, files: list[dict[str, object]]) -> list[dict[str, object]]:
    """``files`` with the oldest ``MERGE_FILES`` of each layer that holds as many merged
    into one file of the next layer (again while a layer fills up)."""
    import pyarrow.parquet as pq

    while True:
        layers: dict[int, list[dict[str, object]]] = {}
        for f in files:
            m = _LAYER_FILE.match(str(f["fileName"]))
            if m is not None:
                layers.setdefault(int(m.group(3)), []).append(f)
        full = sorted(layer for layer, found in layers.items() if len(found) >= MERGE_FILES)
        if not full:
            return files
        layer = full[0]
        merging = sorted(layers[layer], key=lambda f: str(f["fileName"]))[:MERGE_FILES]
        rows = pa.concat_tables(
            pq.read_table(
                store.path(HISTORY_DIR, str(f["fileName"])),
                columns=SCHEMA.names,
                filesystem=store.fs,
            ).cast(SCHEMA)
            for f in merging
        )
        rows = rows.sort_by("instantTime")
        first, last = rows["instantTime"][0].as_py(), rows["instantTime"][-1].as_py()
        name = f"{first}_{last}_{layer + 1}.parquet"
        size = store.write_parquet(store.path(HISTORY_DIR, name), rows)
        gone = {str(f["fileName"]) for f in merging}
        files = [f for f in files if str(f["fileName"]) not in gone]
        files.append({"fileName": name, "fileLen": size})


def _clean(store: TableStore, version: int) -> None:
    """Removes the manifests older than the ``KEEP_VERSIONS`` latest and the files none of
    those names."""
    kept = range(max(1, version - KEEP_VERSIONS + 1), version + 1)
    named: set[str] = set()
    for v in kept:
        try:
            named.update(str(f["fileName"]) for f in files_of(store, v))
        except FileNotFoundError:
            continue
    for info in store.list_files(store.path(HISTORY_DIR)):
        m = _MANIFEST.match(info.base_name)
        old_manifest = m is not None and int(m.group(1)) < kept[0]
        unnamed = _LAYER_FILE.match(info.base_name) is not None and info.base_name not in named
        if old_manifest or unnamed:
            store.delete(info.path)


def read(store: TableStore) -> list[Entry]:
    """Every archived instant the latest snapshot holds, oldest first."""
    import pyarrow.parquet as pq

    out = []
    for f in files_of(store, latest_version(store)):
        table = pq.read_table(store.path(HISTORY_DIR, str(f["fileName"])), filesystem=store.fs)
        for r in table.to_pylist():
            out.append(
                Entry(
                    r["instantTime"],
                    r["completionTime"],
                    r["action"],
                    r["metadata"] or b"",
                    r["plan"] or b"",
                )
            )
    return sorted(out, key=lambda e: e.instant)
