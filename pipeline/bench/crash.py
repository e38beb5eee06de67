"""``dynbucket bench crash``: the crash model. A stream of small writes with the table
services on, as a user gets them, whose writer and service processes are killed or paused
at random, round after round; after every round the table must be whole.

Each round:

1. A writer process streams batches (upserts of a 2,000-key pool in two partitions, every
   seventh batch a delete) into the table, saying when it starts and commits each.
2. After a random time, one fault: the writer killed (SIGKILL); one of its service
   processes killed, or paused (SIGSTOP), then the writer killed; or the writer paused
   past its lease while this process writes (the paused writer must not commit over it),
   then let go and killed.
3. The service processes of a killed writer must end with it (they watch their parent).
4. This process writes once (a settling write, keys of its own), waits for the services
   that write made due, and checks: no instant pending since the last round's check (a
   service left behind is finished within one service cycle), ``.hoodie/`` and the file
   counts bounded, the rows equal to the model (every committed batch; a batch in flight
   at the fault either whole or not at all) by dynbucket and by hudi-rs, ``check`` healthy.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

from dynbucket.base.errors import ConcurrentWriteError
from dynbucket.format.file_group.slices import data_files
from dynbucket.format.index.file_names import index_files
from dynbucket.format.table.options import TableOptions
from dynbucket.format.table.paths import HOODIE_DIR, TIMELINE_DIR
from dynbucket.format.timeline import heartbeat
from dynbucket.format.timeline.plans import left_pending
from dynbucket.format.timeline.timeline import Timeline, seconds_since
from dynbucket.format.timeline.transaction import DETACHED_ACTIONS
from dynbucket.table import Table

SCHEMA = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
KEYS = 2_000
ROWS = 200
#: A short timeline, lease and heartbeat, so that each service runs often and a dead
#: writer's lease (and instant's heartbeat) runs out within a round.
OPTIONS = TableOptions(
    lock_lease_seconds=2.0,
    commit_lease_seconds=2.0,
    heartbeat_expiry_seconds=2.0,
    compaction_delta_commits=2,
    index_compaction_min_files=2,
    clean_max_commits=2,
    cleaner_commits_retained=3,
    keep_min_commits=6,
    keep_max_commits=10,
    # Logs merged by log compactions (which run in service processes) until they reach
    # the base's size, then compacted: both, and service processes to kill.
    compaction_log_size_ratio=1.0,
)
#: Bounds a round's check holds the table to (with OPTIONS): entries of ``.hoodie/`` and of
#: dynbucket's own timeline, files per file group, index files per partition. A killed
#: service holds archival and cleaning back until the next write after its lease ran out
#: finishes it: about a lease of writes (2 s of ~20 writes a second, three timeline files
#: each, and a service instant or two per write) beyond ``keep_max_commits``; a paused
#: service process holds its writer's services of that kind back for as long as that
#: writer lives (here, up to 1.5 s more).
MAX_TIMELINE_ENTRIES = 300
MAX_GROUP_FILES = 80
MAX_INDEX_FILES = 24
FAULTS = ("kill writer", "kill service", "pause service", "pause writer")


def batch(b: int) -> tuple[str, pa.Table]:
    """Batch ``b`` of the writer's stream: (operation, rows), the same in every process."""
    rng = random.Random(b)
    ids = rng.sample(range(KEYS), 20 if b % 7 == 3 else ROWS)
    rows = pa.table(
        {
            "id": [f"k{i}" for i in ids],
            "day": [f"d{i % 2}" for i in ids],
            "v": [b] * len(ids),
        },
        schema=SCHEMA,
    )
    return ("delete", rows.select(["id", "day"])) if b % 7 == 3 else ("upsert", rows)


WRITER = r"""
import sys, time
from dynbucket.base.errors import ConcurrentWriteError, DynBucketError
from dynbucket.bench.crash import batch
from dynbucket.table import Table

t = Table.open(sys.argv[1])
b = int(sys.argv[2])
while True:
    op, rows = batch(b)
    print("S", b, flush=True)
    try:
        getattr(t, op)(rows)
        print("C", b, flush=True)
    except ConcurrentWriteError:  # a dead or paused writer's lease, or fenced: not this one
        time.sleep(0.2)
    except DynBucketError as e:
        print("E", b, type(e).__name__, str(e)[:200].replace("\n", " "), flush=True)
    b += 1
"""


@dataclass
class Model:
    """The rows the table must hold: each key's (partition, value)."""

    rows: dict[str, tuple[str, int]] = field(default_factory=dict)

    def apply(self, b: int) -> None:
        op, data = batch(b)
        self.apply_rows(op, data)

    def apply_rows(self, op: str, data: pa.Table) -> None:
        for r in data.to_pylist():
            if op == "delete":
                self.rows.pop(r["id"], None)
            else:
                self.rows[r["id"]] = (r["day"], r["v"])

    def copy(self) -> Model:
        return Model(dict(self.rows))


@dataclass
class Writer:
    """The writer process of a round and what it said."""

    proc: subprocess.Popen[str]
    started: list[int] = field(default_factory=list)
    committed: list[int] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            kind, _, rest = line.strip().partition(" ")
            b = rest.split(" ", 1)[0]
            if kind == "S" and b.isdigit():
                self.started.append(int(b))
            elif kind == "C" and b.isdigit():
                self.committed.append(int(b))
            elif kind == "E":
                self.errors.append(rest)

    def services(self) -> list[int]:
        """The writer's service processes (its children)."""
        return children_of(self.proc.pid)


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (Linux: from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def _is_tracker(pid: int) -> bool:
    """Whether ``pid`` is multiprocessing's resource tracker (it ends once every process
    holding its pipe has)."""
    try:
        return b"resource_tracker" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie, dead but not yet reaped, does not)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _signal(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, sig)


def _settle(path: str, key: str, lease: float) -> str:
    """This process's write (its own key), retried while a dead writer's lease runs out;
    then the services it made due, waited for. Returns its instant."""
    t = Table.open(path)
    deadline = time.monotonic() + 4 * lease + 10
    row = pa.table({"id": [key], "day": ["d0"], "v": [0]}, schema=SCHEMA)
    while True:
        try:
            result = t.upsert(row)
            break
        except ConcurrentWriteError:  # a lease still held: the fault's writer's
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
    t.wait_for_services()
    # What the dead writer left pending: its data write, settled by a write once its
    # heartbeat expired, and the services its processes ran (killed or paused with it),
    # run again by a write once older than a lease and their heartbeats expired. The write
    # above may have come before either (a service then read as left by `check`, a moment
    # later, holding archival back): wait for both, and write again, as the writer's next
    # write would.
    timeline = Timeline(t.store, t.spec.options.merge_on_read)
    dead, left = _dead_writes(t), [i.id for i in left_pending(timeline)]
    while (dead or left) and time.monotonic() < deadline:
        if not any(heartbeat.is_alive(t.store, i) for i in dead + left) and all(
            seconds_since(i) > lease for i in left
        ):
            break
        time.sleep(0.2)
    if dead or left:
        result = t.upsert(row)
        t.wait_for_services()
    t.close()
    return result.instant


def _dead_writes(t: Table) -> list[str]:
    """The table's pending data writes (the killed writer's, once this one committed)."""
    return [i.id for i in t._timeline.pending() if i.action not in DETACHED_ACTIONS]


def _hudi_rows(path: str) -> dict[str, tuple[str, int]]:
    from hudi import HudiReadOptions, HudiTableBuilder

    table = HudiTableBuilder.from_base_uri(path).build()
    out: dict[str, tuple[str, int]] = {}
    for b in table.read(HudiReadOptions()):
        for r in b.select(["id", "day", "v"]).to_pylist():
            out[r["id"]] = (r["day"], r["v"])
    return out


def _counts(t: Table) -> dict[str, int]:
    """What must stay bounded: timeline entries, files per group, index files."""
    store = t.store
    entries = len(store.list_files(store.path(HOODIE_DIR)))
    entries += len(store.list_files(store.path(TIMELINE_DIR)))
    per_group: dict[str, int] = {}
    index = 0
    for p in ("day=d0", "day=d1"):
        for f in data_files(store, p):
            per_group[f.file_id] = per_group.get(f.file_id, 0) + 1
        index = max(index, len(index_files(store, p)))
    return {
        "timeline_entries": entries,
        "max_group_files": max(per_group.values(), default=0),
        "max_index_files": index,
    }


def run_round(
    path: str,
    r: int,
    rng: random.Random,
    model: Model,
    first: int,
    carried: set[str],
    fault: str | None = None,
) -> tuple[dict[str, Any], Model, int, set[str]]:
    """One round (module doc; ``fault``: this one, else one drawn); returns its report,
    the model after it, the next batch id and the instants pending at its check."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, path, str(first)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
        start_new_session=True,
    )
    writer = Writer(proc)
    fault = fault or rng.choice(FAULTS)
    lease = OPTIONS.lock_lease_seconds
    report: dict[str, Any] = {"round": r, "fault": fault}
    # 1. (the first ~1.5 s: the process starting). The fault waits for a first commit,
    # however long a busy machine takes to start the process: a round that faults a writer
    # with nothing written tests nothing.
    began, draw = time.monotonic(), rng.uniform(1.5, 4.0)
    while not writer.committed and proc.poll() is None and time.monotonic() < began + 120:
        time.sleep(0.05)
    time.sleep(max(0.0, began + draw - time.monotonic()))
    victim = 0
    if fault in ("kill service", "pause service"):  # 2.
        # The first log compaction starts them: a few seconds in, more on a busy machine.
        deadline = time.monotonic() + 30
        while (
            not (services := writer.services())
            and proc.poll() is None
            and time.monotonic() < deadline
        ):
            time.sleep(0.1)
        report["service_processes"] = len(services)
        workers = [p for p in services if not _is_tracker(p)] or services
        if workers:
            victim = rng.choice(workers)
            report["victim"] = "tracker" if _is_tracker(victim) else "service"
            _signal(victim, signal.SIGKILL if fault == "kill service" else signal.SIGSTOP)
            time.sleep(rng.uniform(0.3, 1.5))
    if fault == "pause writer":
        _signal(proc.pid, signal.SIGSTOP)
        time.sleep(lease + 0.5)  # its lease runs out while it is stopped
        _settle(path, f"p{r}-a", lease)  # the paused writer must not commit over this
        model.apply_rows("upsert", pa.table({"id": [f"p{r}-a"], "day": ["d0"], "v": [0]}))
        _signal(proc.pid, signal.SIGCONT)
        time.sleep(rng.uniform(0.5, 1.5))  # it wakes up: fenced, then writes on
    services = writer.services()
    _signal(proc.pid, signal.SIGKILL)
    proc.wait()
    if fault == "pause service" and victim:
        _signal(victim, signal.SIGCONT)  # a paused process sees its parent gone once let go
    deadline = time.monotonic() + 5  # 3.
    while any(alive(p) for p in services) and time.monotonic() < deadline:
        time.sleep(0.1)
    orphans = [p for p in services if alive(p)]
    with contextlib.suppress(ProcessLookupError):  # whatever is left of its session
        os.killpg(proc.pid, signal.SIGKILL)
    # The model: every committed batch in order; one started and not said committed (in
    # flight at the kill, or failed) either whole or not at all.
    committed = set(writer.committed)
    unsure = [b for b in writer.started if b not in committed]
    last = max(writer.started, default=first - 1)
    t0 = time.perf_counter()
    settled = _settle(path, f"p{r}", lease)  # 4.
    settle_s = time.perf_counter() - t0
    model.apply_rows("upsert", pa.table({"id": [f"p{r}"], "day": ["d0"], "v": [0]}))
    t = Table.open(path)
    rows = t.to_arrow(meta_columns=False, columns=["id", "day", "v"]).to_pylist()
    ours = {x["id"]: (x["day"], x["v"]) for x in rows}
    expected = None
    for chosen in itertools.product((False, True), repeat=min(len(unsure), 3)):
        trial = model.copy()
        maybe = dict(zip(unsure, chosen, strict=False))
        for b in range(first, last + 1):
            if b in committed or maybe.get(b, False):
                trial.apply(b)
        if trial.rows == ours:
            expected = trial
            break
    timeline = Timeline(t.store, True)
    pending = {i.id for i in timeline.pending()}
    report_of_check = t.check()
    stuck = sorted(pending & carried)
    report.update(
        batches_committed=len(committed),
        batches_unsure=len(unsure),
        writer_errors=writer.errors[:2],
        orphan_service_processes=len(orphans),
        settle_seconds=round(settle_s, 2),
        pending=len(pending),
        stuck_pending=stuck,
        equal_to_model=expected is not None,
        hudi_rs_equal=_hudi_rows(path) == ours,
        healthy=report_of_check.healthy,
        check=[str(f).splitlines()[0][:300] for f in report_of_check.findings[:2]],
        **_counts(t),
    )
    report["ok"] = bool(
        expected is not None
        and report["hudi_rs_equal"]
        and report["healthy"]
        and not stuck
        and not orphans
        and report["timeline_entries"] <= MAX_TIMELINE_ENTRIES
        and report["max_group_files"] <= MAX_GROUP_FILES
        and report["max_index_files"] <= MAX_INDEX_FILES
    )
    t.close()
    assert settled
    return report, expected or model, last + 1, pending


def run(
    rounds: int, seed: int = 7, workdir: str | None = None, out: Callable[[str], None] = print
) -> dict[str, Any]:
    """``rounds`` rounds on a new table; prints a JSON line per round and the summary."""
    root = Path(workdir or tempfile.mkdtemp(prefix="dynbucket-crash-"))
    root.mkdir(parents=True, exist_ok=True)
    path = str(root / "table")
    Table.create(path, SCHEMA, "id", "day", "v", options=OPTIONS).close()
    rng = random.Random(seed)
    model, first, carried = Model(), 0, set[str]()
    reports = []
    for r in range(rounds):
        report, model, first, carried = run_round(path, r, rng, model, first, carried)
        reports.append(report)
        out("crash " + json.dumps(report))
    worst = {
        k: max(x[k] for x in reports)
        for k in ("timeline_entries", "max_group_files", "max_index_files", "pending")
    }
    summary = {
        "bench": "crash",
        "rounds": rounds,
        "rounds_ok": sum(x["ok"] for x in reports),
        "faults": {f: sum(x["fault"] == f for x in reports) for f in FAULTS},
        "batches_committed": sum(x["batches_committed"] for x in reports),
        "stuck_pending": sum(len(x["stuck_pending"]) for x in reports),
        "orphan_service_processes": sum(x["orphan_service_processes"] for x in reports),
        "worst": worst,
        "bounds": {
            "timeline_entries": MAX_TIMELINE_ENTRIES,
            "max_group_files": MAX_GROUP_FILES,
            "max_index_files": MAX_INDEX_FILES,
        },
        "failed_rounds": [x for x in reports if not x["ok"]][:5],
        "table": path,
    }
    out("BENCH " + json.dumps(summary))
    return summary
