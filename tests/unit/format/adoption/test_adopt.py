"""Adoption (``Table.adopt``) of every table Apache Hudi wrote in ``tests/data/hudi/``: a
table dynbucket can continue is adopted, read equal to hudi-rs, then written (updates, new
keys, a new partition, a delete, a compaction) and still read equal to hudi-rs and to an
in-memory model, in its own table version; any other is refused by name, with nothing
written."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from dynbucket.base.errors import (
    AdoptionRefusedError,
    NotAdoptedError,
    TableExistsError,
)
from dynbucket.cli import commands as cli
from dynbucket.format.file_group import adopted
from dynbucket.format.health.check import check
from dynbucket.format.hudi import archived, log_file, lsm_history, properties
from dynbucket.format.hudi.avro import Writer
from dynbucket.format.hudi.avro_file import encode
from dynbucket.format.hudi.avro_read import decoder
from dynbucket.format.storage.store import TableStore
from dynbucket.options import ConsistentHashingIndex, DynamicBucketIndex, SimpleBucketIndex
from dynbucket.table import Table
from tests.hudi_readers import check_hudi_reads, hudi_read, rows_by_key
from tests.hudi_tables import DATA, tree, unzipped

TABLES = sorted(str(p.relative_to(DATA))[: -len(".zip")] for p in DATA.rglob("*.zip"))
#: What dynbucket does not take yet, by a word of the table's name, and why.
REFUSED = {"lance": "its base files are LANCE"}
#: Tables with a key in two live rows (Hudi's insert): refused without ``deduplicate=True``.
DUPLICATED = {
    "rollback": "key.* have more than one live row .*'TXN-002', in 2 rows",
    "v9_timebasedkeygen": "key.* of partition '2024/01/15/(09|10)' have more than "
    "one live row .*'TXN-001', in 2 rows",
}


def _refusal(name: str, reasons: dict[str, str] = REFUSED) -> str | None:
    return next((why for word, why in reasons.items() if word in name), None)


def _kept(rows: pa.Table, keys: list[str], ordering: str | None) -> pa.Table:
    """The deduplication rule on a reader's rows: of a key's rows, the largest ordering
    value, ties to the latest commit."""
    best: dict[tuple[Any, ...], tuple[Any, ...]] = {}
    for i, r in enumerate(rows.to_pylist()):
        rank = (r[ordering] if ordering else 0, r["_hoodie_commit_time"], i)
        key = tuple(r[k] for k in keys)
        if key not in best or rank > best[key]:
            best[key] = rank
    return rows.take(sorted(rank[-1] for rank in best.values()))


def _changed(column: pa.ChunkedArray, by: int) -> pa.Array:
    """Other values of a key or partition field (new keys, a new partition)."""
    if pa.types.is_string(column.type):
        return pc.binary_join_element_wise(column, pa.scalar(f"_{by}"), "")
    return pc.add(column, pa.scalar(by, column.type)).cast(column.type)


def _fresh(schema: pa.Schema, n: int) -> pa.Table:
    """``n`` rows of a flat schema (the empty tables' own)."""
    values: dict[str, list[Any]] = {}
    for f in schema:
        if pa.types.is_string(f.type):
            values[f.name] = [f"v{i}" for i in range(n)]
        elif pa.types.is_boolean(f.type):
            values[f.name] = [i % 2 == 0 for i in range(n)]
        else:
            values[f.name] = list(range(n))
    return pa.table(values, schema=schema)


def _writes(t: Table) -> list[tuple[str, pa.Table]]:
    """Updates of two rows (their ordering values raised), two new keys, one new key in a
    new partition, then a delete of one adopted row."""
    spec, names = t._spec, t._spec.schema.names
    rows = t.to_arrow(columns=names).select(names)
    if rows.num_rows == 0:
        return [("upsert", _fresh(spec.schema, 4)), ("delete", _fresh(spec.schema, 1))]
    updates = rows.slice(0, 2)
    if spec.ordering_field is not None:
        at = names.index(spec.ordering_field)
        updates = updates.set_column(at, spec.ordering_field, _changed(updates.column(at), 1))
    new = rows.slice(0, 3)
    for key in spec.record_key:
        new = new.set_column(names.index(key), key, _changed(new.column(key), 1000))
    elsewhere = new.slice(2)
    for field in spec.partition_by:
        at = names.index(field)
        column = elsewhere.column(at)
        if spec.timestamp_partitioning is not None:  # another time: another year
            moved = pc.binary_join_element_wise("2030", pc.utf8_slice_codeunits(column, 4), "")
        else:
            moved = _changed(column, 7)
        elsewhere = elsewhere.set_column(at, field, moved)
    upsert = pa.concat_tables([updates, new.slice(0, 2), elsewhere])
    return [("upsert", upsert), ("delete", rows.slice(rows.num_rows - 1))]


@pytest.mark.sample(8)
@pytest.mark.parametrize("name", TABLES)
def test_every_table_hudi_wrote_is_adopted_and_continued_or_refused_by_name(
    tmp_path: Path, name: str
) -> None:
    root = unzipped(name, tmp_path)
    refusal = _refusal(name)
    duplicated = _refusal(name, DUPLICATED)
    before = tree(root)
    for why in (refusal, duplicated):
        if why is None:
            continue
        fix = ".*deduplicate=True" if why == duplicated else ""  # names the option
        with pytest.raises(AdoptionRefusedError, match=f"{why}.*Nothing was written{fix}"):
            Table.adopt(str(root))
        assert tree(root) == before
        if why == refusal:
            return
    with pytest.raises(NotAdoptedError, match="adopt it"):
        Table.open(str(root))
    hudi_before = hudi_read(str(root))
    metadata_table = (root / ".hoodie" / "metadata").exists()
    before_properties = (root / ".hoodie" / "hoodie.properties").read_bytes()
    t = Table.adopt(str(root), deduplicate=duplicated is not None)
    # Adoption added files under .hoodie/.dynbucket/ only, but for a metadata table, gone
    # as Hudi removes it (its properties then name none of its partitions), and the
    # deduplication's instant: its timeline files and one base file per rewritten group.
    ours = (
        ".hoodie/.dynbucket/",
        ".hoodie/metadata/",
        *[".hoodie/hoodie.properties"] * (metadata_table),
    )
    done = adopted.load(t._store).deduplicated
    new = {p: s for p, s in tree(root).items() if not p.startswith(ours)}
    if duplicated is not None:
        assert done["keys"] == done["rows"] == done["groups"] == 1, done
        made = {p for p in new if str(done["instant"]) in p}
        assert len([p for p in made if p.endswith(".parquet")]) == 1, made
        new = {p: s for p, s in new.items() if p not in made}
        spec = t._spec
        hudi_before = _kept(
            hudi_before, [*spec.partition_by, *spec.record_key], spec.ordering_field
        )
        # hudi-rs reads each key once: the row the rule keeps.
        names = spec.schema.names
        keys = list(dict.fromkeys([*spec.partition_by, *spec.record_key]))
        assert rows_by_key(hudi_read(str(root)), keys, names) == rows_by_key(
            hudi_before, keys, names
        )
    else:
        assert done == {}
    assert new == {p: s for p, s in before.items() if not p.startswith(ours)}
    record = adopted.load(t._store)
    if metadata_table:  # kept: files, and a whole record index; the rest aside, with why
        named = properties.loads(before_properties)["hoodie.table.metadata.partitions"]
        hoodie = properties.loads((root / ".hoodie" / "hoodie.properties").read_bytes())
        assert hoodie["hoodie.table.metadata.partitions"] == ",".join(record.metadata_kept)
        assert record.metadata_kept[:1] == ("files",), record
        assert set(record.metadata_kept) | set(record.metadata_removed) == set(named.split(","))
        assert ("record_index" in record.metadata_kept) == (not t._spec.partitioned_record_index)
        aside = root / ".hoodie" / ".dynbucket" / "metadata-removed" / ".hoodie" / "metadata"
        for partition in record.metadata_removed:
            assert (aside / partition).is_dir() and not (
                root / ".hoodie" / "metadata" / partition
            ).exists()
    spec, names = t._spec, t._spec.schema.names
    keys = list(dict.fromkeys([*spec.partition_by, *spec.record_key]))
    assert rows_by_key(t.to_arrow(), keys, names) == rows_by_key(hudi_before, keys, names)
    check_hudi_reads(t)  # the snapshot, as of every instant, read-optimized
    model = rows_by_key(t.to_arrow(), keys, names)
    for operation, rows in _writes(t):
        if operation == "upsert":
            t.upsert(rows)
            model.update(rows_by_key(rows, keys, names))
        else:
            t.delete(rows.select(list(dict.fromkeys([*spec.record_key, *spec.partition_by]))))
            for key in rows_by_key(rows, keys, names):
                del model[key]
    if spec.options.merge_on_read:
        assert t.compact().files_written > 0
    assert rows_by_key(t.to_arrow(), keys, names) == model  # one row per key (I2)
    check_hudi_reads(t)
    hoodie = properties.loads((root / ".hoodie" / "hoodie.properties").read_bytes())
    version = name.rsplit("/", 1)[-1].split("_")[0][1:]
    assert hoodie["hoodie.table.version"] == version  # written in its own version
    report = check(TableStore.at(str(root)))
    assert report.healthy, report.findings
    t.close()
    if metadata_table:  # hudi-rs lists files through the kept files partition: a stray
        # copy of a base file under a new file id stays invisible to it
        base = next(p for p in sorted(root.rglob("*.parquet")) if ".hoodie" not in p.parts)
        stray = base.with_name(
            f"{'0' * 8}-stray-0000-0000-000000000000-0_{base.name.split('_', 1)[1]}"
        )
        shutil.copy(base, stray)
        assert hudi_read(str(root)).num_rows == len(model)
        stray.unlink()


def test_adoption_is_undone_by_deleting_its_folder_and_can_run_again(tmp_path: Path) -> None:
    root = unzipped("quickstart_trips_table/mor/avro/v6_trips_8i1u", tmp_path)
    uri = str(root)
    assert cli.main(["adopt", uri]) == 0
    with pytest.raises(TableExistsError, match="already a dynbucket table"):
        Table.adopt(uri)
    first = adopted.load(TableStore.at(uri))
    # The Avro log's instant was read from its block, its group numbered in its partition.
    (log,) = [n for n in first.logs]
    assert log.endswith("_0-26-85") and first.logs[log] == "20250331030645735"
    assert sorted(first.buckets.values()) == [0, 0, 0]
    shutil.rmtree(root / ".hoodie" / ".dynbucket")
    adopted._LOADED.clear()
    with pytest.raises(NotAdoptedError):
        Table.open(uri)
    t = Table.adopt(uri)
    assert adopted.load(t._store) == first
    assert t.to_arrow().num_rows == 8
    t.close()


def test_a_dynbucket_table_without_its_folder_is_adopted_healthy(tmp_path: Path) -> None:
    """A dynbucket table whose ``.hoodie/.dynbucket/`` was deleted (undoing an adoption
    after writes, as its message says) is adopted again: its commits still name the index
    files that went with the folder, which are no longer its index (adoption builds that
    from the rows), so ``check`` does not ask to restore them; a later write's are
    checked."""
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
    uri = str(tmp_path / "t")
    t = Table.create(uri, schema, "id", "day", "ts")
    for i in range(3):
        t.upsert(pa.table({"id": [f"a{i}", "b"], "day": ["d0", "d1"], "ts": [i, i]}))
    t.close()
    shutil.rmtree(Path(uri) / ".hoodie" / ".dynbucket")
    adopted._LOADED.clear()
    t = Table.adopt(uri)
    assert t.check().healthy, str(t.check())
    t.upsert(pa.table({"id": ["c"], "day": ["d0"], "ts": [9]}))
    (written,) = [p for p in (Path(uri) / ".hoodie/.dynbucket/rli/day=d0").glob("*.delta*")]
    written.unlink()
    problems = str(t.check())
    assert "index file of completed instant" in problems and written.name in problems
    t.close()


def test_a_hudi_bucket_index_table_adopts_as_a_simple_bucket_index(tmp_path: Path) -> None:
    """A table written with Hudi's bucket index (here one of ours, its .dynbucket/ removed:
    the same file ids and bucket hash) continues as SimpleBucketIndex of its count; another
    count is refused by the first key out of place."""
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
    root = tmp_path / "t"
    t = Table.create(str(root), schema, "id", "day", index=SimpleBucketIndex(3))
    rows = pa.table(
        {
            "id": [f"k{i}" for i in range(40)],
            "day": [f"d{i % 2}" for i in range(40)],
            "v": list(range(40)),
        },
        schema=schema,
    )
    t.upsert(rows)
    t.close()
    shutil.rmtree(root / ".hoodie" / ".dynbucket")
    before = tree(root)
    with pytest.raises(
        AdoptionRefusedError,
        match="in bucket .* where Hudi's bucket hash over 4 buckets puts it.*num_buckets",
    ):
        Table.adopt(str(root), index=SimpleBucketIndex(4))
    assert tree(root) == before
    with pytest.raises(AdoptionRefusedError, match="consistent hashing"):
        Table.adopt(str(root), index=ConsistentHashingIndex())  # type: ignore[arg-type]
    # The count from the properties, as Hudi's writer's options say it.
    path = root / ".hoodie" / "hoodie.properties"
    props = properties.loads(path.read_bytes())
    path.write_bytes(
        properties.dumps(
            {**props, "hoodie.index.type": "BUCKET", "hoodie.bucket.index.num.buckets": "3"}
        )
    )
    t = Table.adopt(str(root))
    assert t._spec.bucket_options == SimpleBucketIndex(3)
    assert not (root / ".hoodie" / ".dynbucket" / "rli").exists()  # a hash needs no index
    t.upsert(pa.table({"id": ["k1", "new"], "day": ["d1", "d0"], "v": [-1, 99]}, schema=schema))
    live = {r["id"]: r for r in t.to_arrow().to_pylist()}
    assert live["k1"]["v"] == -1 and live["new"]["v"] == 99 and len(live) == 41
    assert {r["_bucket"] for r in live.values()} <= {0, 1, 2}
    check_hudi_reads(t)
    assert check(TableStore.at(str(root))).healthy
    t.close()


def test_a_table_with_a_pending_instant_is_refused(tmp_path: Path) -> None:
    root = unzipped("sample_table/mor/parquet/v6_nonpartitioned", tmp_path)
    (root / ".hoodie" / "20990101000000000.deltacommit.requested").write_bytes(b"")
    before = tree(root)
    with pytest.raises(AdoptionRefusedError, match="pending on its timeline.*Finish or roll"):
        Table.adopt(str(root))
    assert tree(root) == before


def test_a_metadata_table_goes_as_hudi_removes_it(tmp_path: Path) -> None:
    """A writer that does not keep Hudi's metadata table true removes it (Hudi does the same
    with hoodie.metadata.enable=false): no reader may list files from a stale one."""
    root = unzipped("quickstart_trips_table/mor/avro/v6_trips_8i1u", tmp_path)
    files = root / ".hoodie" / "metadata" / "files"
    files.mkdir(parents=True)
    (files / ".files-0000-0_00000000000000010.log.1_0-0-0").write_bytes(b"stale list")
    path = root / ".hoodie" / "hoodie.properties"
    props = properties.loads(path.read_bytes())
    path.write_bytes(properties.dumps({**props, "hoodie.table.metadata.partitions": "files"}))
    t = Table.adopt(str(root))
    after = properties.loads(path.read_bytes())
    assert after["hoodie.table.metadata.partitions"] == ""
    assert {k: v for k, v in after.items() if "metadata.partitions" not in k} == props
    assert not (root / ".hoodie" / "metadata").exists()
    check_hudi_reads(t)
    t.close()


def test_a_version_9_table_stays_version_9_and_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unzipped("sample_table/mor/avro/v9_txns_simple_nometa", tmp_path)
    uri = str(root)
    assert cli.main(["adopt", uri]) == 0
    t = Table.open(uri)
    t.upsert(t.to_arrow(columns=t._spec.schema.names).select(t._spec.schema.names).slice(0, 1))
    timeline = root / ".hoodie" / "timeline"
    newest = max(p.name for p in timeline.iterdir() if "_" in p.name)
    # Layout 2: the completion time in the name, the metadata in Avro.
    assert newest.endswith(".deltacommit") and (timeline / newest).read_bytes()[:4] == b"Obj\x01"
    assert not list((root / ".hoodie").glob("2*.deltacommit"))  # nothing in layout 1
    t.close()
    capsys.readouterr()
    assert cli.main(["show", uri]) == 0
    assert "MERGE_ON_READ, table version 9" in capsys.readouterr().out


def test_rolled_back_and_corrupt_blocks_of_a_hudi_log_are_skipped(tmp_path: Path) -> None:
    """On HDFS a Hudi writer appends to a log: a failed write's block stays in it, followed
    by the rollback command block Hudi appends, and a writer that died mid-append leaves a
    corrupt block. Hudi's readers skip both; so does dynbucket, also when it compacts."""
    root = unzipped("quickstart_trips_table/mor/avro/v6_trips_8i1u", tmp_path)
    hudi_before = hudi_read(str(root))
    (log,) = root.glob("city=san_francisco/.*.log.*")
    (block,) = log_file.read_blocks(log.read_bytes())
    schema = block.header[log_file.SCHEMA]
    (record,) = log_file.avro_records(block)
    value, _ = decoder(json.loads(schema))(memoryview(record), 0)
    failed = "20250331030650000"
    w = Writer()
    encode(w, json.loads(schema), {**value, "fare": 999.0, "_hoodie_commit_time": failed}, {})
    with log.open("ab") as out:
        out.write(log_file.avro_data_block([w.getvalue()], failed, schema))
        out.write(log_file.command_block(failed, "20250331030651000"))
        out.write(log_file.MAGIC + b"\x00\x00\x00")  # an append cut short
    t = Table.adopt(str(root))
    keys, names = ["city", "uuid"], t._spec.schema.names
    expected = rows_by_key(hudi_before, keys, names)
    assert rows_by_key(t.to_arrow(), keys, names) == expected
    assert t.compact().files_written == 1
    assert rows_by_key(t.to_arrow(), keys, names) == expected
    assert check(TableStore.at(str(root))).healthy
    t.close()


@pytest.mark.parametrize(
    ("name", "lower_wins"),
    [
        ("sample_table/mor/parquet/v6_nonpartitioned", True),  # OverwriteWithLatestAvroPayload
        ("sample_table/cow/v8_nonpartitioned", False),
    ],  # EVENT_TIME_ORDERING
)
def test_an_update_with_a_lower_ordering_value_wins_as_the_tables_merge_mode_says(
    tmp_path: Path, name: str, lower_wins: bool
) -> None:
    """Hudi 1.x takes a version 6 table whose payload overwrites with the latest record as
    ordered by commit time, whatever its precombine field; a table of event-time ordering
    keeps the record of the larger value."""
    t = Table.adopt(str(unzipped(name, tmp_path)))
    names = t._spec.schema.names
    row = t.to_arrow(columns=names).select(names).slice(0, 1)
    lower = pc.subtract(row.column("longField"), pa.scalar(100, pa.int64()))
    update = row.set_column(names.index("longField"), "longField", lower)
    update = update.set_column(names.index("name"), "name", pa.array(["lower"]))
    t.upsert(update)
    (key,) = row.column("id").to_pylist()
    live = {r["id"]: r["name"] for r in t.to_arrow(columns=["id", "name"]).to_pylist()}
    assert (live[key] == "lower") == lower_wins
    check_hudi_reads(t)
    t.close()


@pytest.mark.parametrize(
    ("name", "column"),
    [
        ("sample_table/mor/avro/v9_txns_simple_nometa", "txn_ts"),
        ("sample_table/mor/parquet/v6_simplekeygen_nonhivestyle_overwritetable", "longField"),
    ],
)
def test_archival_of_an_adopted_table_takes_hudis_own_instants_along(
    tmp_path: Path, name: str, column: str
) -> None:
    """Archival of an adopted table archives Hudi's own instants (replace commits, ...)
    with dynbucket's, into the archived timeline of the table's layout (version 9: Hudi
    1.x's LSM history; 6: Avro log files), a replace commit once the groups it replaced
    are removed: the active timeline stays short, with no gap Hudi's readers would read
    as uncommitted, and both readers read on."""
    root = unzipped(name, tmp_path)
    keep = {
        "hoodie.keep.min.commits": 4,
        "hoodie.keep.max.commits": 6,
        "cleaner.commits-retained": 3,
        "hoodie.clean.max.commits": 2,
    }
    t = Table.adopt(str(root), options=keep)
    names = t._spec.schema.names
    rows = t.to_arrow(columns=names).select(names)
    for i in range(8):
        raised = pc.add(rows.column(column), pa.scalar(i + 1, pa.int64()))
        raised_rows = rows.set_column(names.index(column), column, raised)
        t.upsert(raised_rows.slice(i % min(3, rows.num_rows), 2))  # never empty
        t.wait_for_services()
        check_hudi_reads(t, time_travel=False)
    if t._spec.table_version == 9:
        history = lsm_history.read(t._store)
        assert history[0].metadata[:4] == b"Obj\x01"
        assert all(e.completion > e.instant for e in history)
        assert {e.action for e in history} >= {"deltacommit", "replacecommit"}
        timeline = root / ".hoodie" / "timeline"
    else:
        logs = (root / ".hoodie" / "archived").iterdir()
        actions = {a for log in logs for _, a, _ in archived.read_entries(log.read_bytes())}
        assert actions >= {"deltacommit", "replacecommit"}
        timeline = root / ".hoodie"
    done = [p.name for p in timeline.iterdir() if p.name[:1] == "2" and p.name.count(".") == 1]
    assert len(done) <= 6 and not [n for n in done if "replacecommit" in n]
    check_hudi_reads(t)
    assert check(TableStore.at(str(root))).healthy
    t.close()


def _without(root: Path, *keys: str, **changed: str) -> None:
    """``hoodie.properties`` with ``keys`` removed and ``changed`` set (dots as ``__``)."""
    path = root / ".hoodie" / "hoodie.properties"
    props = {k: v for k, v in properties.loads(path.read_bytes()).items() if k not in keys}
    props.update({k.replace("__", "."): v for k, v in changed.items()})
    path.write_bytes(properties.dumps(props))


def _newest_replace_base(root: Path) -> Path:
    """A base file the newest replace commit (a clustering, an insert overwrite) wrote."""
    timeline = root / ".hoodie" / "timeline"
    done = sorted(p for p in timeline.glob("*_*.replacecommit"))[-1]
    from dynbucket.format.timeline.timeline import document_of

    doc = document_of(done.read_bytes())
    stats = [s for v in doc["partitionToWriteStats"].values() for s in v]
    return root / stats[0]["path"]


ADOPTION_DAMAGE = [
    # (table, damage, words of the refusal)
    (
        "sample_table/mor/parquet/v6_complexkeygen_hivestyle",
        lambda r: _without(r, "hoodie.table.partition.fields"),
        r"rows sit in partition folders .* name no partition field",
    ),
    (
        "sample_table/cow/v8_complexkeygen_hivestyle",
        lambda r: _without(r, "hoodie.table.partition.fields"),
        r"rows sit in partition folders .* name no partition field",
    ),
    (
        "sample_table/mor/avro/v9_txns_simple_meta",
        lambda r: _without(r, "hoodie.table.partition.fields"),
        r"rows sit in partition folders .* name no partition field",
    ),
    (
        "sample_table/cow/v9_txns_simple_meta",
        lambda r: _newest_replace_base(r).unlink(),
        r"file\(s\) its newest commits list are missing",
    ),
    (
        "sample_table/cow/v8_complexkeygen_hivestyle",
        lambda r: _without(r, hoodie__table__precombine__field="no_such_field"),
        r"ordering field 'no_such_field', which its schema .* does not have",
    ),
    (
        "sample_table/mor/avro/v9_txns_simple_meta",
        lambda r: _without(r, hoodie__table__ordering__fields="no_such_field"),
        r"ordering field 'no_such_field', which its schema .* does not have",
    ),
    (
        "sample_table/mor/parquet/v6_nonpartitioned",
        lambda r: _without(r, "hoodie.table.name"),
        r"has no hoodie.table.name",
    ),
    (
        "sample_table/mor/parquet/v6_nonpartitioned",
        lambda r: _without(r, "hoodie.table.type"),
        r"has no hoodie.table.type",
    ),
    (
        "sample_table/mor/parquet/v6_nonpartitioned",
        lambda r: _without(r, hoodie__table__type="COPY_ON_WRITE"),
        r"say COPY_ON_WRITE, but its timeline holds delta commits",
    ),
]


@pytest.mark.parametrize(
    ("name", "damage", "words"),
    ADOPTION_DAMAGE,
    ids=[f"{n.rsplit('/', 1)[1]}-{i}" for i, (n, *_) in enumerate(ADOPTION_DAMAGE)],
)
def test_a_table_whose_definition_does_not_explain_its_files_is_refused(
    tmp_path: Path, name: str, damage: Any, words: str
) -> None:
    """Each of these was adopted (a partitioned table as unpartitioned, rows of a lost
    clustering file gone, the ordering field dropped, a merge-on-read table read as
    copy-on-write) or failed with a raw KeyError: each is refused by name, and nothing is
    written."""
    root = unzipped(name, tmp_path)
    damage(root)
    before = tree(root)
    with pytest.raises(AdoptionRefusedError, match=f"{words}.*Nothing was written"):
        Table.adopt(str(root))
    assert tree(root) == before


def test_a_second_adoption_beside_a_slow_one_touches_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A second adoption while the first one builds its index: it used to delete the first
    one's .hoodie/.dynbucket/ (or rewrite its index), leaving a table that could be neither
    opened nor adopted again. Now it is refused at once, and the first one completes."""
    from dynbucket.base.errors import ConcurrentWriteError
    from dynbucket.format.adoption import adopt as adoption

    root = unzipped("sample_table/mor/parquet/v6_complexkeygen_hivestyle", tmp_path)
    real, seen = adoption.build_index, []

    def slow(*args: Any, **kwargs: Any) -> None:
        before = tree(root)
        with pytest.raises(ConcurrentWriteError, match="another process is adopting"):
            Table.adopt(str(root))
        seen.append(tree(root) == before)
        real(*args, **kwargs)

    monkeypatch.setattr(adoption, "build_index", slow)
    t = Table.adopt(str(root))
    assert seen == [True]
    monkeypatch.undo()
    with pytest.raises(TableExistsError):
        Table.adopt(str(root))
    check_hudi_reads(t)
    assert check(TableStore.at(str(root))).healthy
    t.close()


def test_a_table_whose_commits_carry_two_schemas_adopts_with_the_newer(tmp_path: Path) -> None:
    """A Hudi table whose older commits wrote fewer fields and a narrower type (here one
    dynbucket wrote in Hudi's format, its own records removed: no table Apache Hudi wrote
    with two schemas is at hand) adopts with its newest commit's schema: older files read
    the new field as null and the promoted type, by both readers, and writes go on."""
    from dynbucket.format.table.paths import META_DIR

    uri = str(tmp_path / "t")
    narrow = pa.schema([("id", pa.string()), ("ts", pa.int64()), ("v", pa.int32())])
    t = Table.create(uri, narrow, "id", ordering_field="ts")
    t.upsert(pa.table({"id": ["a", "b"], "ts": [1, 1], "v": pa.array([1, 2], pa.int32())}))
    t.upsert(pa.table({"id": ["b", "c"], "ts": [2, 2], "v": [2**40, 3], "w": ["x", "y"]}))
    t.close()
    shutil.rmtree(Path(uri) / META_DIR)
    adopted = Table.adopt(uri)
    assert adopted.schema.field("v").type == pa.int64() and "w" in adopted.schema.names
    rows = {r["id"]: (r["v"], r["w"]) for r in adopted.to_arrow().to_pylist()}
    assert rows == {"a": (1, None), "b": (2**40, "x"), "c": (3, "y")}
    adopted.upsert(pa.table({"id": ["a"], "ts": [3], "v": [4], "w": ["z"]}))
    check_hudi_reads(adopted, time_travel=False)


def test_a_table_with_hudis_global_record_index_adopts_as_global_and_keys_move(
    tmp_path: Path,
) -> None:
    """Hudi 1.0's record index (table version 8) is global: the table adopts with a global
    index, a key moves city (one row, for both readers); a partition-scoped table whose
    key is in two partitions is refused as global, naming the key."""
    root = unzipped("quickstart_trips_table/mor/avro/v8_trips_8i3u1d", tmp_path)
    t = Table.adopt(str(root))
    assert t.spec.scheme.keys_move
    rows = t.to_arrow(columns=t._spec.schema.names).select(t._spec.schema.names)
    moving = rows.slice(0, 1)
    key, city = moving.column("uuid")[0].as_py(), moving.column("city")[0].as_py()
    moving = moving.set_column(rows.schema.get_field_index("city"), "city", pa.array(["oslo"]))
    at = rows.schema.get_field_index("ts")
    moving = moving.set_column(at, "ts", pc.add(moving.column("ts"), 1))
    assert t.upsert(moving).keys_moved == 1
    after = {r["uuid"]: r["city"] for r in t.to_arrow().to_pylist()}
    assert after[key] == "oslo" != city and len(after) == rows.num_rows
    check_hudi_reads(t, time_travel=False)
    t.close()

    # A partition-scoped table whose key is in two cities: refused as global, by name.
    other = unzipped("quickstart_trips_table/mor/avro/v6_trips_8i1u", tmp_path / "v6")
    scoped = Table.adopt(str(other))
    names = scoped._spec.schema.names
    twin = scoped.to_arrow(columns=names).select(names).slice(0, 1)
    twin = twin.set_column(names.index("city"), "city", pa.array(["oslo"]))
    assert scoped.upsert(twin).keys_inserted == 1  # a second row of the key, in oslo
    scoped.close()
    shutil.rmtree(other / ".hoodie" / ".dynbucket")  # undone: a table Hudi's readers read
    key = twin.column("uuid")[0].as_py()
    with pytest.raises(
        AdoptionRefusedError, match=f"more than one partition .*{key}.*deduplicate=True"
    ):
        Table.adopt(str(other), index=DynamicBucketIndex(global_index=True))
    assert not (other / ".hoodie" / ".dynbucket").exists()
    # Deduplicated in the table's scope: the same ordering value, so the later commit's row.
    both = Table.adopt(str(other), index=DynamicBucketIndex(global_index=True), deduplicate=True)
    assert adopted.load(both._store).deduplicated["rows"] == 1
    for rows in (both.to_arrow(), hudi_read(str(other))):
        assert [r["city"] for r in rows.to_pylist() if r["uuid"] == key] == ["oslo"]
    check_hudi_reads(both)
    both.close()


def test_an_adoption_that_fails_after_deduplicating_leaves_a_hudi_table_of_unique_keys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The deduplication's commit is Hudi's: an adoption that dies after it leaves a table
    Hudi's readers read with one row per key, which adopts again without the option."""
    from dynbucket.format.adoption import adopt as adoption

    root = unzipped("sample_table/mor/avro/v9_nonpartitioned_rollback", tmp_path)

    def dies(*args: object) -> None:
        raise OSError("the machine went away")

    monkeypatch.setattr(adoption, "build_index", dies)
    with pytest.raises(OSError, match="went away"):
        Table.adopt(str(root), deduplicate=True)
    monkeypatch.undo()
    assert not (root / ".hoodie" / ".dynbucket" / "table.json").exists()
    ids = [r["txn_id"] for r in hudi_read(str(root)).to_pylist()]
    assert sorted(ids) == ["TXN-001", "TXN-002", "TXN-003"]
    assert cli.main(["adopt", str(root)]) == 0  # nothing left to deduplicate
    assert "deduplicated" not in capsys.readouterr().out
    t = Table.open(str(root))
    assert sorted(r["txn_id"] for r in t.to_arrow().to_pylist()) == sorted(ids)
    assert check(TableStore.at(str(root))).healthy
    t.close()


def test_adopt_deduplicate_on_the_command_line_says_what_it_removed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = unzipped("sample_table/cow/v9_timebasedkeygen_nonhivestyle", tmp_path)
    assert cli.main(["adopt", str(root), "--deduplicate"]) == 0
    out = capsys.readouterr().out
    instant = adopted.load(TableStore.at(str(root))).deduplicated["instant"]
    assert (
        f"1 key(s) had more than one live row; 1 row(s) removed from 1 file group(s) in "
        f"instant {instant}" in out
    )
    # Hudi's record index stays whole (the deduplication kept the row it pointed at).
    assert "metadata table kept in step: files, record_index" in out
    for partition in ("column_stats", "partition_stats"):
        assert f"metadata table partition {partition} removed (undo restores it): " in out


def test_undo_puts_back_what_adoption_changed_until_a_write(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Undo restores the properties and the metadata table partitions adoption set aside
    (and removes .hoodie/.dynbucket/): every file is back, at its path with its size.
    After a write it is refused, changing nothing: a restored column_stats would not
    describe the new files."""
    root = unzipped("sample_table/mor/avro/v9_txns_simple_meta", tmp_path)
    before = tree(root)
    assert cli.main(["adopt", str(root)]) == 0
    assert "secondary_index_merchant_idx removed (undo restores it)" in capsys.readouterr().out
    assert tree(root) != before
    assert cli.main(["adopt", "--undo", str(root)]) == 0
    assert tree(root) == before
    with pytest.raises(NotAdoptedError):
        Table.open(str(root))
    t = Table.adopt(str(root))
    t.upsert(t.to_arrow(columns=t._spec.schema.names).select(t._spec.schema.names).slice(0, 1))
    t.close()
    after_write = tree(root)
    with pytest.raises(AdoptionRefusedError, match="cannot undo .* 1 instant.* since"):
        Table.undo_adoption(str(root))
    assert tree(root) == after_write


def test_a_version_9_table_with_a_partitioned_record_index_adopts_partition_scoped(
    tmp_path: Path,
) -> None:
    """Re-adopting a dynbucket version 9 table (its ``.dynbucket/`` deleted) took any
    record index for Hudi's global one: a key written into a second partition then deleted
    its row in the first."""
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
    uri = str(tmp_path / "t")
    options = {"hoodie.table.version": 9}
    with Table.create(uri, schema, "id", "day", "ts", options=options) as t:
        t.upsert(pa.table({"id": ["k1", "k2"], "day": ["a", "a"], "ts": [1, 1]}))
    shutil.rmtree(Path(uri) / ".hoodie" / ".dynbucket")
    with Table.adopt(uri) as t:
        assert not t.spec.scheme.keys_move
        t.upsert(pa.table({"id": ["k1"], "day": ["b"], "ts": [2]}))
        want = [("k1", "a"), ("k1", "b"), ("k2", "a")]
        got = t.to_arrow(meta_columns=False).select(["id", "day"]).to_pylist()
        assert sorted((r["id"], r["day"]) for r in got) == want
        theirs = hudi_read(uri).select(["id", "day"]).to_pylist()
        assert sorted((r["id"], r["day"]) for r in theirs) == want
        assert t.check().healthy
