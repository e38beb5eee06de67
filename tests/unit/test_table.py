"""Table create/open: a specific error each, naming field, value and fix, and nothing
written (no instant, no file); bad input in general is ``test_hostile_input.py``'s."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest

from dynbucket.base.errors import (
    ConfigError,
    InvalidInputError,
    NotATableError,
    TableCorruptedError,
    TableExistsError,
)
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])


def _table(tmp_path: Path) -> Table:
    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    t.upsert(pa.table({"id": ["a"], "day": ["d1"], "v": [1]}))
    return t


def _files(t: Table) -> list[str]:
    """Files of the table but the writer lease (each write takes the next one)."""
    return sorted(
        str(p)
        for p in Path(t._store.root).rglob("*")
        if p.is_file() and not p.name.startswith("writer.lease")
    )


def test_open_of_a_path_that_is_not_a_table(tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    with pytest.raises(NotATableError, match="not a dynbucket table"):
        Table.open(str(tmp_path / "x"))


def test_create_refuses_an_existing_table_or_a_non_empty_folder(tmp_path: Path) -> None:
    _table(tmp_path)
    with pytest.raises(TableExistsError, match="already exists"):
        Table.create(str(tmp_path / "t"), SCHEMA, "id")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "data.csv").write_text("x")
    with pytest.raises(TableExistsError, match="not empty"):
        Table.create(str(tmp_path / "other"), SCHEMA, "id")


def test_open_checks_the_persisted_properties(tmp_path: Path) -> None:
    t = _table(tmp_path)
    again = Table.open(t.uri)
    assert again._spec == t._spec
    assert again.to_arrow(meta_columns=False).to_pylist() == [{"id": "a", "day": "d1", "v": 1}]


def test_insert_of_a_known_key_is_refused_and_writes_nothing(tmp_path: Path) -> None:
    t = _table(tmp_path)
    before = _files(t)
    with pytest.raises(InvalidInputError, match="already exist"):
        t.insert(pa.table({"id": ["a", "new"], "day": ["d1", "d1"], "v": [1, 2]}))
    assert _files(t) == before
    assert t.insert(pa.table({"id": ["new"], "day": ["d1"], "v": [2]})).keys_inserted == 1


def test_a_table_in_the_first_layout_is_refused_with_the_reason(tmp_path: Path) -> None:
    (tmp_path / "old" / ".dynbucket").mkdir(parents=True)
    (tmp_path / "old" / ".dynbucket" / "table.json").write_text("{}")
    with pytest.raises(TableCorruptedError, match="first layout.*no migration"):
        Table.open(str(tmp_path / "old"))


def test_hoodie_properties_say_what_hudi_readers_need(tmp_path: Path) -> None:
    from dynbucket.format.hudi.properties import loads

    t = Table.create(str(tmp_path / "orders-2026"), SCHEMA, "id", "day")
    props = loads((tmp_path / "orders-2026" / ".hoodie" / "hoodie.properties").read_bytes())
    assert {
        k: props[k]
        for k in (
            "hoodie.table.name",
            "hoodie.table.type",
            "hoodie.table.version",
            "hoodie.timeline.layout.version",
            "hoodie.table.recordkey.fields",
            "hoodie.table.partition.fields",
            "hoodie.table.precombine.field",
            "hoodie.table.checksum",
        )
    } == {
        "hoodie.table.name": "orders_2026",
        "hoodie.table.type": "MERGE_ON_READ",
        "hoodie.table.version": "6",
        "hoodie.timeline.layout.version": "1",
        "hoodie.table.recordkey.fields": "id",
        "hoodie.table.partition.fields": "day",
        "hoodie.table.precombine.field": "_hoodie_commit_time",  # no ordering field
        "hoodie.table.checksum": "3087979720",  # crc32("default.orders_2026")
    }
    assert Table.open(t.uri)._spec == t._spec


def test_options_may_be_given_by_their_keys_and_a_wrong_key_is_named(tmp_path: Path) -> None:
    t = Table.create(
        str(tmp_path / "t"),
        pa.schema([("id", pa.string())]),
        "id",
        options={"hoodie.clean.automatic": False, "hoodie.compact.inline.max.delta.commits": 3},
    )
    assert not t._spec.options.clean_automatic and t._spec.options.compaction_delta_commits == 3
    assert not Table.open(t.uri)._spec.options.clean_automatic  # persisted
    with pytest.raises(
        ConfigError,
        match="unknown option clean_automatic='false'; known options: .*hoodie.clean.automatic",
    ):
        Table.create(
            str(tmp_path / "u"),
            pa.schema([("id", pa.string())]),
            "id",
            options={"clean_automatic": False},
        )
    assert not (tmp_path / "u").exists()  # nothing written


def test_repr_and_results_say_what_they_are(tmp_path: Path) -> None:
    from dynbucket import ServiceResult, SimpleBucketIndex

    t = Table.create(str(tmp_path / "users"), SCHEMA, "id", "day", "v")
    assert repr(t) == (
        f"<dynbucket.Table users at {t.uri}: MERGE_ON_READ (Hudi table version 6), "
        "key=id partition_by=day, index=DynamicBucketIndex>"
    )
    s = Table.create(str(tmp_path / "s"), SCHEMA, "id", index=SimpleBucketIndex(num_buckets=2))
    assert repr(s).endswith("key=id, index=SimpleBucketIndex>")
    assert str(t.compact()) == "compaction: nothing to do"
    assert str(ServiceResult("clean", "20261126000000000", 0, 3)) == (
        "clean 20261126000000000: 3 files removed"
    )


@pytest.mark.parametrize("table_type", ["MERGE_ON_READ", "COPY_ON_WRITE"])
def test_history_says_what_the_write_result_says(tmp_path: Path, table_type: str) -> None:
    """The same data files counted in both, Hudi's action for the table's type, and a key
    deleted then written again counted as inserted (the ``WriteResult`` docstring)."""
    t = Table.create(
        str(tmp_path / "t"), SCHEMA, "id", "day", options={"hoodie.table.type": table_type}
    )
    rows = pa.table({"id": ["a", "b", "c"], "day": ["d1", "d1", "d2"], "v": [1, 2, 3]})
    results = [t.upsert(rows), t.delete(rows.select(["id", "day"]).slice(0, 1)), t.upsert(rows)]
    written = [h for h in t.history() if h.get("operation") in ("upsert", "delete")]
    assert [h["files"] for h in written] == [r.files_written for r in results]
    assert all(h["index_files"] > 0 for h in written)  # counted apart
    action = "deltacommit" if table_type == "MERGE_ON_READ" else "commit"
    assert {h["action"] for h in written} == {action}
    assert (results[2].keys_inserted, results[2].keys_updated) == (1, 2)
    assert written[2]["keys"]["inserted"] == 1


def test_a_write_of_nothing_commits_nothing_and_says_so(tmp_path: Path) -> None:
    t = _table(tmp_path)
    before, files = t.history(), _files(t)
    empty = t.upsert(SCHEMA.empty_table())
    assert (empty.instant, empty.rows_written) == ("", 0)
    assert str(empty) == "upsert: nothing written, no instant committed"
    absent = t.delete(pa.table({"id": ["x", "y"], "day": ["d1", "d1"]}))
    assert (absent.instant, absent.keys_not_found) == ("", 2)
    assert str(absent) == "delete: 2 key(s) not found, nothing written, no instant committed"
    assert (t.history(), _files(t)) == (before, files)  # no instant, pending or not
    # The writer goes on as before (its caches still match the table).
    assert t.upsert(pa.table({"id": ["b"], "day": ["d1"], "v": [2]})).keys_inserted == 1
    assert sorted(t.to_arrow().column("id").to_pylist()) == ["a", "b"]
    kept = Table.create(
        str(tmp_path / "k"), SCHEMA, "id", "day", options={"hoodie.allow.empty.commit": True}
    )
    assert kept.upsert(SCHEMA.empty_table()).instant != ""  # Hudi's behaviour, when asked
    assert len(kept.history()) == 1


def test_a_closed_table_refuses_writes_and_still_reads(tmp_path: Path) -> None:
    from dynbucket import TableClosedError

    t = _table(tmp_path)
    t.close()
    files = _files(t)
    for write in (
        lambda: t.upsert(pa.table({"id": ["b"], "day": ["d1"], "v": [2]})),
        lambda: t.delete(pa.table({"id": ["a"], "day": ["d1"]})),
        lambda: t.compact(),
    ):
        with pytest.raises(TableClosedError, match=r"was closed .*Table.open\('"):
            write()
    assert _files(t) == files
    assert t.to_arrow().column("id").to_pylist() == ["a"]


def test_open_of_a_missing_path_says_it_is_missing(tmp_path: Path) -> None:
    with pytest.raises(NotATableError, match=r"nowhere does not exist: check the path"):
        Table.open(str(tmp_path / "nowhere"))


def test_several_writers_by_default_and_an_older_table_keeps_its_one_writer(
    tmp_path: Path,
) -> None:
    import json

    t = Table.create(str(tmp_path / "t"), SCHEMA, "id", "day")
    assert t._spec.options.write_concurrency_mode == "OPTIMISTIC_CONCURRENCY_CONTROL"
    # A table written before the option existed has no such key: it keeps one writer.
    definition = Path(t._store.path(".hoodie/.dynbucket/table.json"))
    doc = json.loads(definition.read_text())
    del doc["options"]["hoodie.write.concurrency.mode"]
    definition.write_text(json.dumps(doc))
    assert Table.open(t.uri)._spec.options.write_concurrency_mode == "SINGLE_WRITER"
