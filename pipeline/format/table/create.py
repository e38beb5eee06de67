"""A new table on storage: its definition's files (``table.json``, ``hoodie.properties``)
and, for version 9, an empty metadata table. Apart from ``spec.py`` so that loading a
definition does not load the metadata table's writer (HFile, Avro, the record index)."""

from __future__ import annotations

from dynbucket.base.errors import ConfigError, TableExistsError
from dynbucket.format.hudi import properties, versions
from dynbucket.format.metadata import partitions as mdt_partitions
from dynbucket.format.metadata import writer as metadata_writer
from dynbucket.format.storage import caches
from dynbucket.format.storage.store import TableStore
from dynbucket.format.table.options import CREATED_VERSIONS, TableOptions
from dynbucket.format.table.paths import PROPERTIES_FILE, TABLE_FILE
from dynbucket.format.table.spec import TableSpec, adoption_advice, hudi_described
from dynbucket.format.timeline.timeline import remember_layout


def create_table(store: TableStore, spec: TableSpec) -> None:
    """Persists a new table's definition at ``store``.

    Raises:
        TableExistsError: a table (or any other file) is already there.
    """
    if store.is_file(store.root):
        raise TableExistsError(
            f"{store.uri} is a file, not a folder; create the table in an empty or new folder"
        )
    if store.exists(store.path(TABLE_FILE)):
        raise TableExistsError(f"a dynbucket table already exists at {store.uri}; open it")
    if store.exists(store.path(PROPERTIES_FILE)):
        raise TableExistsError(
            f"{store.uri} holds a table written by Apache Hudi ({hudi_described(store)}): "
            f"{adoption_advice(store)}, or create the table in a new folder"
        )
    others = [i.path for i in store.list_files(store.root)] + store.list_dirs(store.root)
    if others:
        raise TableExistsError(
            f"{store.uri} is not empty ({len(others)} entries, e.g. {others[0]!r}); create "
            "the table in an empty or new folder"
        )
    if spec.table_version not in CREATED_VERSIONS:
        raise ConfigError(
            f"{TableOptions.key('table_version')}={spec.table_version}: a table is created in "
            f"one of {CREATED_VERSIONS}; pick one"
        )
    # Before anything is written: the schema's Avro form may refuse a field.
    hoodie = {k: v for k, v in spec.hoodie_properties().items() if v != ""}
    if not store.create_exclusive(store.path(TABLE_FILE), spec.to_json()):
        raise TableExistsError(f"another process created a table at {store.uri} just now")
    # What this process knew of an earlier table at this path is not this table's.
    caches.forget(store.uri, store.root)
    remember_layout(store, int(hoodie[versions.TIMELINE_LAYOUT]))
    if spec.table_version == 9:
        if store.is_local:  # every process tells the layout by this folder
            store.fs.create_dir(store.path(versions.LAYOUT_2_TIMELINE))
        metadata_writer.create(
            store, spec.name, spec.metadata_partitions, spec.partitioned_record_index
        )
    store.write_atomic(
        store.path(PROPERTIES_FILE), properties.dumps(hoodie, "Properties saved by dynbucket")
    )
    mdt_partitions.remember(store, hoodie)
