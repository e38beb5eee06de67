"""The table layer against an in-memory reference model: seeded random operation sequences.

Every sequence (on a merge-on-read or copy-on-write table, of Hudi table version 6 or 9,
with or without Hudi's meta fields, its ordering field of any integer width or none) mixes
upserts (with duplicate keys in a batch and out-of-order ordering
values), deletes (of known and unknown keys), change batches (upserts and deletes marked
``_hoodie_is_deleted`` in one write: deletes with larger and smaller ordering values than
the stored row, a key deleted and written again in one batch, deletes of unknown keys),
partial upserts (records without ``v``: a live key keeps its value, a new one gets null),
schema changes (a write whose records bring a new field ``w``: older rows read it as
null, time travel before it reads the old schema; or ``v`` promoted to a double; then
both, two changes between compactions), another writer's write that begins after one
and commits before it (a change feed following the table must still get both),
compactions, index compactions, commits that
fail at the last moment, and writers that die mid-instant. After each step the snapshot must
equal the model (dict per partition), no two file groups may share a bucket id in a
partition (I4), and every live key must sit in the bucket it first got (I1).

After every step a change feed reads up to ``changes_end()`` (hudi-rs's read of the range
returns the same rows), and at the end it holds every live row as the table does: it never
skipped a commit. After every step every read shape runs too: without meta columns, a
projection, the read-optimized view (base files only), time travel to an earlier step, and
a point lookup of known, deleted and unknown keys; each must equal what the model held then.

The same sequences run once per bucket scheme: dynamic (the default, 200 sequences), simple
bucket and consistent hashing (40 each), whose sequences also regroup the table half-way and
at random: a rescale that grows or shrinks a partition (by 2, 3, 1/2, 1/3, 3/2 or 2/3), or
a rebalance (splits and merges): there a key moves exactly where the new layout says (its
Hudi hash mod the new count, its range of the new ring), and nowhere else.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from fractions import Fraction
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from dynbucket.actors import DynamicBucketIndex
from dynbucket.base.columns import BUCKET, FILE_ID, HASH
from dynbucket.base.errors import CommitFailedError
from dynbucket.base.keyhash import hash_columns
from dynbucket.base.options import ConsistentHashingIndex, SimpleBucketIndex
from dynbucket.format.buckets.hudi_hash import bucket_ids, list_hashes
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline import outcome
from dynbucket.format.timeline.timeline import Timeline
from dynbucket.table import Table
from tests.dead_writer import die_mid_instant
from tests.hudi_readers import COMMIT_TIME, check_hudi_reads, hudi_can_merge, hudi_read, rows_by_key
from tests.seeds import seeds
from tests.shares import Counts, added_by_slot, check_shares
from tests.unit.format.timeline.test_conflicts import _beside

SCHEMA = pa.schema(
    [("id", pa.string()), ("region", pa.string()), ("v", pa.int64()), ("ts", pa.int64())]
)
KEY_SCHEMA = pa.schema(SCHEMA.field(n) for n in ("id", "region"))
#: Sequences of the dynamic scheme in the suite (~1.8 s each on 2 cores, each run new
#: seeds: ``tests/seeds.py``); ``make test-long`` runs 80.
SEQUENCES = int(os.environ.get("DYNBUCKET_MODEL_SEQUENCES", "25"))
#: Sequences of each stateless scheme.
STATELESS_SEQUENCES = SEQUENCES // 5
STEPS = 7
#: Every how many sequences hudi-rs reads the table after each step (it costs ~10 ms a read;
#: every sequence: about a minute of the suite).
HUDI_EVERY = 1


Key = tuple[str, str]  # (partition value, record key)
Record = tuple[int, int, str | None]  # (v, ts, w)
#: The ordering field's type (None: the table has no ordering field, the latest commit
#: wins and a batch's last record), each sequence one: every integer width.
ORDERINGS = [pa.int64(), pa.int8(), pa.int16(), pa.int32(), pa.uint16(), None]


def _schemas(ordering: pa.DataType | None) -> list[pa.Schema]:
    """The schemas a sequence goes through, each ``evolve`` step the next: the first, then
    a new nullable field ``w`` or ``v`` promoted from bigint to double (by the seed), then
    both (two changes between compactions)."""
    first = SCHEMA.set(3, pa.field("ts", ordering or pa.int64()))
    evolved = pa.schema([*first, pa.field("w", pa.string())])
    promoted = first.set(first.get_field_index("v"), pa.field("v", pa.float64()))
    both = evolved.set(evolved.get_field_index("v"), pa.field("v", pa.float64()))
    return [first, evolved, promoted, both]


class Model:
    """What the table must hold, as Hudi merges a file slice: per key and file group its
    base record and its log record (the log's records folded: a delete replaces what came
    before, an upsert replaces a delete or a record of a smaller-or-equal ts), the live
    record being the log record of the key's group unless that is a delete (gone) or the
    base record's ts is larger. A copy-on-write table, a new file group and a compaction
    collapse the two into the base record. Plus each live key's first bucket.

    With dynamic buckets a deleted key leaves the index, and comes back as a new key, into
    whichever bucket has room (``dynamic``): its records in the group it left stay there
    (the base record a read-optimized query still reads until a compaction); returning to
    that group below the base record it left, the group's base is rewritten, so its new
    row shows wherever it lands."""

    def __init__(
        self,
        copy_on_write: bool,
        dynamic: bool = False,
        first: pa.Schema = SCHEMA,
        ordered: bool = True,
    ) -> None:
        self.copy_on_write = copy_on_write
        self.ordered = ordered
        """Whether ``ts`` is the ordering field (else the later record always wins)."""
        self.first = first
        self.dynamic = dynamic
        self.base: dict[tuple[Key, int], Record] = {}
        self.log: dict[tuple[Key, int], Record | None] = {}
        self.where: dict[Key, int] = {}
        """Each key's group (its bucket; 0 for every key of a stateless scheme)."""
        self.known: set[Key] = set()
        self.first_bucket: dict[Key, int] = {}
        self.hudi_checks = False
        self.history: dict[str, set[tuple[str, str, int, int, str | None]]] = {}
        """instant -> what the table held then (for time travel)."""
        self.bucket_of: Callable[[list[Key]], list[int]] = lambda keys: [0] * len(keys)
        """A stateless scheme's bucket of each key, as its layout in force computes it."""
        self.schema = first
        """The table's schema: records written after a change that adds it carry ``w``."""

    def newer(self, ts: int, than: int) -> bool:
        """Whether a record of ``ts`` replaces one of ``than`` written before it."""
        return ts >= than if self.ordered else True

    def older(self, ts: int, than: int) -> bool:
        """Whether a record of ``ts`` written later loses to one of ``than``."""
        return self.ordered and ts < than

    def records(self, batch: list[dict[str, Any]]) -> pa.Table:
        """A batch as the writer is handed it: in the table's schema (with ``w`` once the
        schema has it)."""
        if "w" not in self.schema.names:
            return pa.Table.from_pylist(batch, self.schema)
        return pa.Table.from_pylist([{**r, "w": _w(r)} for r in batch], self.schema)

    def live(self, key: Key) -> Record | None:
        at = (key, self.where.get(key, 0))
        base = self.base.get(at)
        if at not in self.log:
            return base
        log = self.log[at]
        if log is None or (base is not None and self.older(log[1], base[1])):
            return None if log is None else base
        return log

    def upsert(
        self, batch: list[dict[str, Any]], into_base: set[Key], buckets: dict[Key, int]
    ) -> None:
        """One commit; ``into_base``: keys the commit wrote into a new base file;
        ``buckets``: where each key of the batch is now."""
        records: dict[Key, Record] = {}
        for r in batch:  # in input order: a later row with an equal ts wins, as in a batch
            key, old = (r["region"], r["id"]), records.get((r["region"], r["id"]))
            if old is None or self.newer(r["ts"], old[1]):
                w = _w(r) if "w" in self.schema.names else None
                records[key] = (r["v"], r["ts"], r.get("w", w))
        if not self.copy_on_write:
            # A key coming back into a group that still holds a larger record of it (its
            # base, under its delete): the writer rewrites that group's base instead of
            # writing a log, so that the new row shows wherever the key lands.
            for key, record in records.items():
                at = (key, buckets[key] if self.dynamic else 0)
                old = self.base.get(at)
                if (
                    self.log.get(at, ()) is None
                    and old is not None
                    and self.older(record[1], old[1])
                ):
                    self._collapse(key[0], buckets[key])
                    into_base = into_base | {
                        k for k in records if buckets[k] == buckets[key] and k[0] == key[0]
                    }
        for key, record in records.items():
            self.known.add(key)
            if self.dynamic:
                self.where[key] = buckets[key]
            self._write(key, record, key in into_base)

    def _collapse(self, partition: str, bucket: int) -> None:
        """One group's base rewritten: its records merged as a compaction merges them (a
        stateless scheme's group: the keys its layout puts in ``bucket``)."""
        if self.dynamic:
            self.compact({k for k, b in self.log if k[0] == partition and b == bucket}, bucket)
            return
        keys = [k for k, _ in self.base.keys() | self.log.keys() if k[0] == partition]
        self.compact({k for k, b in zip(keys, self.bucket_of(keys), strict=True) if b == bucket})

    def change(
        self, batch: list[dict[str, Any]], into_base: set[Key], buckets: dict[Key, int]
    ) -> None:
        """One commit of upserts and deletes marked in the records: per key the record of
        the largest ts wins (a later one on a tie), deletes alike; a winning delete takes
        a live key out unless the key's live record has a larger ts (the delete is stale);
        the winning upserts are an upsert."""
        won: dict[Key, dict[str, Any]] = {}
        for r in batch:
            key = (r["region"], r["id"])
            if key not in won or self.newer(r["ts"], won[key]["ts"]):
                won[key] = r
        gone = [
            r
            for key, r in won.items()
            if r["deleted"]
            and (live := self.live(key)) is not None
            and self.newer(r["ts"], live[1])
        ]
        self.delete(gone)
        self.upsert([r for r in won.values() if not r["deleted"]], into_base, buckets)

    def delete(self, keys: list[dict[str, Any]]) -> None:
        for key in {(k["region"], k["id"]) for k in keys} & self.known:
            if self.dynamic and self.live(key) is not None:
                self.first_bucket.pop(key, None)  # out of the index: back as a new key
            self._write(key, None, False)

    def _write(self, key: Key, record: Record | None, into_base: bool) -> None:
        at = (key, self.where.get(key, 0))
        if self.copy_on_write:
            old = self.base.get(at)
            if record is None:
                self.base.pop(at, None)
            elif old is None or self.newer(record[1], old[1]):
                self.base[at] = record
        elif into_base:
            # A new group, or one the writer rewrote (its logs merged first: ``_collapse``),
            # whose live record an older one still loses to.
            old = self.base.get(at)
            if old is None or record is None or self.newer(record[1], old[1]):
                self.base[at] = record  # type: ignore[assignment]
        else:
            old = self.log.get(at, ())
            if record is None or old in ((), None) or self.newer(record[1], old[1]):  # type: ignore[index]
                self.log[at] = record

    def compact(self, keys: set[Key] | None = None, bucket: int | None = None) -> None:
        """A compaction (``keys``: only those keys' groups, as a rescale or rebalance
        rewrites some groups into base files; ``bucket``: only in that bucket)."""
        if self.copy_on_write:
            return
        for at in list(self.log):
            if keys is not None and at[0] not in keys:
                continue
            if bucket is not None and at[1] != bucket:
                continue
            log, base = self.log.pop(at), self.base.get(at)
            live = (
                base
                if log is not None and base is not None and self.older(log[1], base[1])
                else log
            )
            if live is None:
                self.base.pop(at, None)
            else:
                self.base[at] = live

    def expected(self) -> set[tuple[str, str, int, int, str | None]]:
        return {
            (k, p, *live)
            for p, k in {key for key, _ in self.base.keys() | self.log.keys()}
            if (live := self.live((p, k))) is not None
        }

    def base_files(self) -> set[tuple[str, str, int, int, str | None]]:
        """What a read-optimized query reads: the base records alone."""
        return {(k, p, *record) for ((p, k), _), record in self.base.items()}


def _buckets(table: Table) -> dict[Key, int]:
    """Each live key's bucket."""
    return {(r["region"], r["id"]): r[BUCKET] for r in table.to_arrow().to_pylist()}


def _into_base(table: Table, instant: str) -> set[Key]:
    """Keys whose rows live in a base file ``instant`` wrote for a new file group."""
    new_groups = {
        r.slice.file_id
        for r in table.snapshot().slices()
        if r.slice.base is not None and r.slice.base.instant == instant
    }
    return {
        (r["region"], r["id"]) for r in table.to_arrow().to_pylist() if r[FILE_ID] in new_groups
    }


def _batch(rng: random.Random, keys: int) -> list[dict[str, Any]]:
    return [
        {
            "id": f"k{rng.randrange(keys)}",
            "region": rng.choice(["eu", "us", "ap"]),
            "v": rng.randrange(1000),
            "ts": rng.randrange(5),
        }
        for _ in range(rng.randrange(1, 12))
    ]


def _change_batch(rng: random.Random, keys: int) -> list[dict[str, Any]]:
    """Upserts and deletes (a third), out of order, keys more than once, unknown keys."""
    batch = _batch(rng, keys + 2)
    for r in batch:
        r["deleted"] = rng.random() < 0.35
        if r["deleted"]:
            r["v"] = None  # a delete needs its key and ordering value only
    return batch


def _change_table(batch: list[dict[str, Any]], model: Model) -> pa.Table:
    records = model.records(batch)
    return records.append_column(
        "_hoodie_is_deleted", pa.array([r["deleted"] for r in batch], pa.bool_())
    )


#: Rescale multiples drawn: growths and shrinks, whole and not.
MULTIPLES = [
    Fraction(2),
    Fraction(3),
    Fraction(1, 2),
    Fraction(1, 3),
    Fraction(3, 2),
    Fraction(2, 3),
]


def _grow(table: Table, rng: random.Random, model: Model) -> None:
    """A rescale of one partition (growing or shrinking it) or a rebalance; every live key
    must then sit where the new layout puts it (checked in ``_check``), so the model
    forgets the old buckets. Every key whose group was rewritten (deleted keys too: their
    base records go with the rewrite) is compacted in the model."""
    before = table.snapshot()
    groups = {(r.partition, r.slice.bucket): r.slice.file_id for r in before.slices()}
    if isinstance(table._spec.bucket_options, SimpleBucketIndex):
        partitions = table.snapshot().partitions()
        if not partitions:
            return
        p = rng.choice(partitions)
        n = table.snapshot().layouts().num_buckets(p)
        fits = [m for m in MULTIPLES if (n * m).denominator == 1]
        m = rng.choice(fits)
        done = table.rescale(float(m), partitions=[p], allow_shuffle=m.denominator != 1)
    else:
        done = table.rebalance()
    if done.instant is not None:
        after = table.snapshot().slices()
        rewritten = {
            r.slice.file_id
            for r in after
            if r.slice.base is not None and r.slice.base.instant == done.instant
        }
        keys = {k for k, _ in model.base.keys() | model.log.keys()}
        old = _layout_buckets(table, [(p, k) for p, k in keys], before)
        moved = {
            key
            for key, b in zip(keys, old, strict=True)
            if groups.get((f"region={key[0]}", b)) in rewritten
        }
        model.compact(moved)
        model.first_bucket.clear()


def _layout_buckets(table: Table, keys: list[tuple[str, str]], snapshot: Any = None) -> list[int]:
    """Each (region, id) key's bucket as the layout in force (as of ``snapshot``, default
    the latest) computes it (stateless schemes)."""
    layouts = (snapshot or table.snapshot()).layouts()
    out = []
    for region, key in keys:
        row, partition = pa.table({"id": [key]}), f"region={region}"
        if isinstance(table._spec.bucket_options, SimpleBucketIndex):
            out.append(int(bucket_ids(list_hashes(row, ["id"]), layouts.num_buckets(partition))[0]))
        else:
            row = row.append_column(HASH, pa.array(hash_columns([row.column("id")])))
            out.append(int(layouts.ring(partition).locate(row.column(HASH).to_numpy())[0]))
    return out


def _w(record: dict[str, Any]) -> str | None:
    """The ``w`` of a record written after the schema change: a function of its value."""
    return None if record.get("v") is None else f"w{record['v']}"


def _rows(table: pa.Table) -> set[tuple[str, str, int, int, str | None]]:
    return {(r["id"], r["region"], r["v"], r["ts"], r.get("w")) for r in table.to_pylist()}


def _read_shapes(table: Table, model: Model, rng: random.Random) -> None:
    """Every read shape a user has, against the model: no meta columns, a projection,
    read-optimized, time travel to an earlier step, a lookup of some keys."""
    expected = model.expected()
    plain = table.to_arrow(meta_columns=False)
    assert plain.column_names == table.schema.names and _rows(plain) == expected
    projected = table.to_arrow(columns=["id", "ts"])
    assert projected.column_names[:2] == ["id", "ts"] and "v" not in projected.column_names
    assert sorted((r["id"], r["ts"]) for r in projected.to_pylist()) == sorted(
        (k, ts) for k, _, _, ts, _ in expected
    )
    optimized = table.to_arrow(read_optimized=True, meta_columns=False)
    assert _rows(optimized) == model.base_files()
    model.history[table.latest_instant() or ""] = expected
    then = rng.choice(sorted(model.history))
    if then:
        assert _rows(table.to_arrow(as_of=then)) == model.history[then]
    probe = [
        {"id": f"k{rng.randrange(30)}", "region": rng.choice(["eu", "us", "ap"])} for _ in range(4)
    ]
    found = table.lookup(pa.Table.from_pylist(probe, KEY_SCHEMA), meta_columns=False)
    wanted = {(r["id"], r["region"]) for r in probe}
    assert _rows(found) == {row for row in expected if row[:2] in wanted}


def _check(
    table: Table, model: Model, before: str | None, rng: random.Random, last: bool = False
) -> None:
    """The model, I1, I2, I4, every read shape; and hudi-rs reads the same (``before``: the
    latest completed instant before the step, for an incremental read; ``last``: also as
    of every instant)."""
    snap = table.to_arrow()
    got = _rows(snap)
    assert got == model.expected()
    _read_shapes(table, model, rng)
    assert snap.num_rows == len(got)  # I2: one live row per (partition, key)
    for partition in table.snapshot().partitions():
        buckets = [s.bucket for s in table.snapshot().bucket_files(partition).values()]
        ids = [r.slice.bucket for r in table.snapshot().slices([partition])]
        assert len(ids) == len(set(ids)) == len(buckets)  # I4
    for r in snap.to_pylist():
        first = model.first_bucket.setdefault((r["region"], r["id"]), r[BUCKET])
        assert r[BUCKET] == first  # I1
    if not table._spec.scheme.index_entries:  # where the scheme says, and nowhere else
        keys = [(r["region"], r["id"]) for r in snap.to_pylist()]
        assert snap.column(BUCKET).to_pylist() == _layout_buckets(table, keys)
    if model.hudi_checks and hudi_can_merge(table):
        check_hudi_reads(table, incremental_after=before, time_travel=last)


class OtherWrite:
    """Another handle's upsert of ``rows``, run once when called; ``instant``: its own."""

    def __init__(self, table: Table, rows: pa.Table) -> None:
        self.table, self.rows, self.instant = table, rows, ""

    def __call__(self) -> None:
        self.instant = self.table.upsert(self.rows).instant


class Feed:
    """A downstream job following the table's change feed: after each step it reads what
    changed up to ``changes_end()`` and keeps the newest row of each key (deletes are not
    reported). A feed that never skips a commit has, at the end, every live row as the
    table holds it (its values and its commit time), whatever order writes completed in;
    hudi-rs's incremental read of each range returns the same rows."""

    def __init__(self, table: Table) -> None:
        self.start = table.changes_end()
        self.seen: dict[Key, tuple[Any, ...]] = {}

    def follow(self, table: Table, hudi: bool) -> None:
        if not table._spec.meta_fields:
            return
        end = table.changes_end()
        rows = table.changes(self.start, end)
        fields = ["v", "ts", *(["w"] if "w" in table.schema.names else []), "_instant"]
        for r in rows.to_pylist():  # w: null before the schema had it, as rows read then
            self.seen[(r["region"], r["id"])] = (r["v"], r["ts"], r.get("w"), r["_instant"])
        if hudi and self.start != "000" and hudi_can_merge(table):
            theirs = hudi_read(table.uri, start=self.start, end=end)
            keys, names = ["region", "id"], [f for f in fields if f != "_instant"]
            got = rows_by_key(theirs, keys, names, COMMIT_TIME) if theirs.num_columns else {}
            ours = rows_by_key(rows, keys, names, "_instant")
            assert {k: got.get(k) for k in ours} == ours, "hudi-rs range misses changes"
            # hudi-rs also returns an update of the range that lost to an older record.
            timeline = table.snapshot().timeline
            done = {timeline.completion_of(i): i.id for i in timeline.completed()}
            taken = {i for c, i in done.items() if self.start < c <= end}
            assert all(got[k][-1] in taken for k in got.keys() - ours.keys()), got
        self.start = end

    def check(self, table: Table) -> None:
        """Every live row was delivered, as it is now."""
        if not table._spec.meta_fields:
            return
        live = {
            (r["region"], r["id"]): (r["v"], r["ts"], r.get("w"), r["_instant"])
            for r in table.to_arrow().to_pylist()
        }
        assert {k: self.seen.get(k) for k in live} == live, "the change feed skipped a commit"


def _index_counts(table: Table) -> Counts:
    """partition -> bucket -> index entries."""
    out: Counts = {}
    for r in table.stats().to_pylist():
        out.setdefault(r["partition"], {})[r["bucket"]] = r["keys"]
    return out


def _check_shares(
    table: Table,
    model: Model,
    batch: list[dict[str, Any]],
    before: Counts,
    slots: int,
    instant: str,
) -> None:
    """I3: what each slot added to each bucket, against the rule (``tests/shares.py``), in
    the lane the write's commit names (a writer beside it makes it one of two); and no
    bucket over capacity."""
    cap = table._spec.dynamic_options.max_keys_per_bucket
    assert cap is not None
    new = {(r["region"], r["id"]) for r in batch} - set(model.first_bucket)
    rows = [r for r in table.to_arrow().to_pylist() if (r["region"], r["id"]) in new]
    added = added_by_slot(
        [f"region={r['region']}" for r in rows],
        [r["id"] for r in rows],
        [r[BUCKET] for r in rows],
        slots,
    )
    timeline = Timeline(table._store, table._spec.options.merge_on_read)
    extra = timeline.metadata(next(i for i in timeline.completed() if i.id == instant))
    check_shares(before, added, cap, slots, (extra.get("lane", 0), extra.get("lanes", 1)))
    assert max(n for part in _index_counts(table).values() for n in part.values()) <= cap


def _index(scheme: str, rng: random.Random, seed: int) -> Any:
    if scheme == "simple":
        return SimpleBucketIndex(
            num_buckets=rng.choice([1, 2, 3]), partition_buckets=rng.choice([{}, {"region=eu": 1}])
        )
    if scheme == "consistent":
        return ConsistentHashingIndex(
            initial_buckets=rng.choice([1, 2]),
            max_keys_per_bucket=rng.choice([2, 3, 5]),
            min_keys_per_bucket=1,
        )
    # Every other sequence keeps its caches (a budget): a committed delete then takes its
    # keys out of a kept cache; without one, the partition a delete touched bootstraps.
    budget = None if seed % 2 else 1 << 20
    return DynamicBucketIndex(max_keys_per_bucket=rng.choice([1, 2, 3, 5]), cache_max_bytes=budget)


CASES = [("dynamic", s) for s in seeds(SEQUENCES)] + [
    (scheme, s)
    for n, scheme in enumerate(("simple", "consistent"), start=1)
    for s in seeds(STATELESS_SEQUENCES, offset=n)
]


@pytest.mark.parametrize(("scheme", "seed"), CASES)
def test_random_sequences_match_the_model(
    tmp_path: Path, scheme: str, seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    # Apart from the seed's parity (the evolution's kind, the cache budget): the table
    # version by the next bit, the ordering field's type by the seed over 4.
    version = 9 if (seed // 2) % 2 else 6
    ordering = ORDERINGS[(seed // 4) % len(ORDERINGS)]
    schemas = _schemas(ordering)
    table = Table.create(
        str(tmp_path / "t"),
        schemas[0],
        "id",
        "region",
        "ts" if ordering is not None else None,
        _index(scheme, rng, seed),
        TableOptions(
            table_version=version,
            lock_lease_seconds=30,
            table_type=rng.choice(["MERGE_ON_READ", "COPY_ON_WRITE"]),
            populate_meta_fields=rng.random() < 0.8,
            # The model knows what compaction does (the "compact" step) and reads every
            # earlier step back: compaction, cleaning and archival run when the sequence
            # says; index compaction, which no read sees, runs by itself after writes.
            compaction_async=False,
            clean_automatic=False,
            archive_automatic=False,
        ),
    )
    model = Model(
        table._spec.options.table_type == "COPY_ON_WRITE",
        scheme == "dynamic",
        schemas[0],
        ordered=ordering is not None,
    )
    changes = [schemas[1] if seed % 2 else schemas[2], schemas[3]]  # two changes at most
    feed = Feed(table)
    slot_rng = random.Random(seed + 1)
    model.hudi_checks = seed % HUDI_EVERY == 0
    model.bucket_of = lambda keys: _layout_buckets(table, keys)
    dead: list[str] = []
    keys = rng.choice([4, 10, 25])
    grow = 0 if table._spec.scheme.index_entries else 1
    for at in range(STEPS):
        before = table.latest_instant()
        step = rng.choices(
            [
                "upsert",
                "delete",
                "change",
                "partial",
                "compact",
                "index",
                "fail",
                "die",
                "grow",
                "evolve",
                "beside",
            ],
            [5, 2, 3, 2, 1, 1, 1, 1, grow, 1 if changes else 0, 1],
        )[0]
        if grow and at == STEPS // 2:
            step = "grow"
        if step == "grow":
            _grow(table, rng, model)
        elif step == "upsert":
            batch = _batch(rng, keys)
            # The dynamic scheme's writes take 1-3 slots (their own generator: the steps
            # stay those of the seed), checked against the rule slots share buckets by (I3).
            slots = slot_rng.choice([1, 2, 3]) if scheme == "dynamic" else 1
            counts = _index_counts(table) if scheme == "dynamic" else None
            done = table.upsert(model.records(batch), assigner_slots=slots)
            model.upsert(batch, _into_base(table, done.instant), _buckets(table))
            if counts is not None:
                _check_shares(table, model, batch, counts, slots, done.instant)
        elif step == "change":
            # Phantom deletes (of keys the table does not hold) take room in their instant
            # as new keys do, unseen by the share rule's check: only capacity is checked.
            batch = _change_batch(rng, keys)
            slots = slot_rng.choice([1, 2, 3]) if scheme == "dynamic" else 1
            done = table.upsert(_change_table(batch, model), assigner_slots=slots)
            model.change(batch, _into_base(table, done.instant), _buckets(table))
            if scheme == "dynamic":
                cap = table._spec.dynamic_options.max_keys_per_bucket
                counts = _index_counts(table).values()
                assert max((n for part in counts for n in part.values()), default=0) <= cap
        elif step == "evolve":  # records with a new field, or v as a double: the schema takes it
            model.schema = changes.pop(0)
            batch = _batch(rng, keys)
            done = table.upsert(model.records(batch))
            model.compact()  # first: no log of the older schema stays (merge-on-read)
            assert done.instant and table.schema == model.schema
            model.upsert(batch, _into_base(table, done.instant), _buckets(table))
        elif step == "partial":
            batch = _batch(rng, keys)
            for r in batch:  # what the writer fills in: the live row's values, else nulls
                live = model.live((r["region"], r["id"]))
                r["v"], r["w"] = (live[0], live[2]) if live is not None else (None, None)
            records = pa.Table.from_pylist(batch, model.first).drop_columns(["v"])
            done = table.upsert(records, partial=True)
            model.upsert(batch, _into_base(table, done.instant), _buckets(table))
        elif step == "delete":
            gone = [
                {"id": f"k{rng.randrange(keys + 3)}", "region": rng.choice(["eu", "us"])}
                for _ in range(rng.randrange(1, 5))
            ]
            table.delete(pa.Table.from_pylist(gone, KEY_SCHEMA))
            model.delete(gone)
        elif step == "beside":
            # Another writer's write begins after this one's and commits before it (its
            # keys are its own): the feed must still get both.
            batch = _batch(rng, keys)
            theirs = [{**r, "id": f"x{r['id'][1:]}"} for r in _batch(rng, keys)]
            other = OtherWrite(Table.open(table.uri), model.records(theirs))
            _beside(monkeypatch, other)
            done = table.upsert(model.records(batch))
            monkeypatch.undo()
            other.table.close()
            model.upsert(theirs, _into_base(table, other.instant), _buckets(table))
            model.upsert(batch, _into_base(table, done.instant), _buckets(table))
        elif step == "compact":
            table.compact()
            model.compact()
        elif step == "index":
            table.compact_index(min_files=2)
        elif step == "fail":
            # Files are written, then the commit point fails: nothing may show.
            def broken(*args: Any, **kwargs: Any) -> Any:
                raise OSError("disk full while committing")

            monkeypatch.setattr(outcome, "decide_commit", broken)
            with pytest.raises(CommitFailedError):
                table.upsert(model.records(_batch(rng, keys)))
            monkeypatch.undo()
        elif step == "die":
            dead.append(die_mid_instant(table, _batch(rng, keys)))
            assert Timeline(table._store).pending()  # readers must not see it
        _check(table, model, before, rng)
        # hudi-rs on each range in every other sequence (a read a step; the snapshot's
        # incremental check runs in all of them).
        feed.follow(table, model.hudi_checks and seed % 2 == 0)
    # An explicit rollback takes whatever a dead writer left, and no file of it remains.
    table.rollback()
    assert not Timeline(table._store).pending()
    assert not [
        p
        for p in (tmp_path / "t").rglob("*")
        if any(i in p.name for i in dead) and p.parent.name != "outcomes"
    ]
    _check(table, model, None, rng, last=True)
    feed.follow(table, model.hudi_checks)
    feed.check(table)
    report = table.check()  # the index names every live key's bucket and no deleted key (I6)
    assert report.healthy, [str(f) for f in report.findings]
