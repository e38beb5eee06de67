"""``dynbucket bench writers``: 1, 2 and 4 writers into one table at once, side by side.

First one writer on a ``SINGLE_WRITER`` table (the whole write's lease: what the moment
leases, heartbeats and commit checks of several writers cost a writer alone), then per
writer count a fresh table (``OPTIMISTIC_CONCURRENCY_CONTROL``, merge-on-read, services
on) holding ``keys`` keys over four partitions; every writer, a process of its own, makes
``writes`` upserts of ``rows`` rows each: half known keys (any writer's), half new keys
(its own range, into the same partitions; each writer in a lane of its own fills buckets
of its lane: ``format/timeline/lanes.py``). Reported: rows per second over all writers
(first write started to last write returned) and per writer, the ratio to one writer's
and (in process) to one writer doing the same writes alone, in turn (``vs the same writes
alone``, with the write p50s' ratio: a table taking n times the writes compacts larger
slices more often, whoever writes them), and to as many writers each writing a table of
its own (the same writes: what the machine allows that many writers at all, so the ratio
is what sharing one table costs),
the writes run again after a conflict, a write's p50 time, where a writer's time goes
(the laps of ``WriteResult.seconds``, summed over its writes: the commit lap holds the
wait for another writer's commit lease and the conflict checks), and the cores the writer
processes kept busy with their CPU seconds per 1,000 rows, and the cores the whole machine
kept busy (service processes included): one writer alone keeping 1.5 of 2 cores busy
leaves several at most 2 / 1.5 = 1.33x its rows per second.

Then a writer killed (SIGKILL) at the two points that matter: holding the commit lease
(committing), and in the middle of its write; reported: how long the next write of
another writer took, against the same write with nobody killed.

Then a stream beside a backfill: a stream's micro-batches (``STREAM_ROWS``-row upserts,
half updates, half new keys, one after another as a stream's batches come) alone, then
with a backfill writing ``BACKFILL_FACTOR`` times larger upserts into the same partitions
beside it, each a process; reported: the micro-batches' p50 and p99 seconds in each case
and their ratio, and the backfill's rows per second (in process only).

``--spark`` runs the writers as threads of one driver sharing one Runtime (Spark on Ray),
each with its own table handle and slot fleet, instead of in-process writer processes.
"""

from __future__ import annotations

import logging
import multiprocessing as mp
import os
import re
import resource
import shutil
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pyarrow as pa

from dynbucket.base.options import DynamicBucketIndex
from dynbucket.bench.report import Measurement, print_report
from dynbucket.format.table.options import TableOptions
from dynbucket.format.timeline.actions import Action
from dynbucket.table import Table

PARTITIONS = 4
STREAM_ROWS = 500
STREAM_BATCHES = 60
BACKFILL_FACTOR = 5
SCHEMA = pa.schema([("id", pa.int64()), ("p", pa.int32()), ("v", pa.int64())])


class _Conflicts(logging.Handler):
    """Counts the writes run again after a conflict (the retry policy's log line), by
    cause (the conflict's reason, its file groups, buckets and counts left out)."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.count = 0
        self.causes: Counter[str] = Counter()

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "after a conflict" in text:
            self.count += 1
            error = text.partition("another writer: ")[2]
            why = error.partition("while it was written: ")[2] or error
            why = why.partition("; nothing")[0]
            self.causes[_cause(why)] += 1


def _cause(why: str) -> str:
    """A conflict's reason without its file groups, buckets, keys and counts."""
    why = re.sub(r"^instant \d+ of \S+: ", "", why)
    why = re.sub(r"\(['\d][^)]*\)|\([^)]*=[^)]*\)|and \d+ more|\d+|file group \S+", "", why)
    return re.sub(r"\s*,[\s,]*|\s+", " ", why).strip()


def _rows(ids: np.ndarray, step: int) -> pa.Table:
    return pa.table(
        {"id": ids, "p": (ids % PARTITIONS).astype(np.int32), "v": np.full(len(ids), step)},
        schema=SCHEMA,
    )


def _batches(writer: int, keys: int, rows: int, writes: int) -> list[pa.Table]:
    rng = np.random.default_rng(writer)
    out = []
    for step in range(writes):
        known = rng.choice(keys, rows // 2, replace=False).astype(np.int64)
        first = keys + (writer * writes + step) * rows
        new = np.arange(first, first + rows - len(known), dtype=np.int64)
        out.append(_rows(np.concatenate([known, new]), step + 1))
    return out


def _write_all(table: Table, batches: list[Any], ordering: str = "step") -> dict[str, Any]:
    """Upserts ``batches`` in turn; ``ordering`` "clock": each batch's ordering values are
    the clock's microseconds as it is written (a stream's event times: a later write's
    values are larger, whichever writer writes it), else the batch's own (its writer's
    step: writers that fall behind each other write updates that lose, counted stale,
    after reading their slices)."""
    handler = _Conflicts()
    logger = logging.getLogger("dynbucket.write.writer")
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    laps: Counter[str] = Counter()
    took = []
    cpu = _cpu_seconds()
    start = time.perf_counter()
    try:
        for batch in batches:
            began = time.perf_counter()
            if ordering == "clock" and isinstance(batch, pa.Table):
                now = np.full(batch.num_rows, time.time_ns() // 1000, np.int64)
                batch = batch.set_column(2, "v", pa.array(now))
            done = table.upsert(batch)
            took.append(time.perf_counter() - began)
            laps.update(done.seconds)
    finally:
        logger.removeHandler(handler)
    end = time.perf_counter()
    out = {
        "start": start,
        "end": end,
        "cpu": _cpu_seconds() - cpu,
        "laps": dict(laps),
        "conflicts": handler.count,
        "causes": dict(handler.causes),
    }
    return {**out, "took": took}


class _MachineCpu:
    """The whole machine's busy CPU seconds (``/proc/stat``: every process, the writers'
    service processes and Spark's and Ray's included, which a writer's own CPU seconds
    leave out), sampled every 50 ms in a thread while the cases run, so that each case's
    span is asked afterwards (:func:`_busy_between`). Nothing where there is no
    ``/proc/stat``."""

    def __init__(self) -> None:
        self.samples: list[tuple[float, float, float]] = []
        """(wall time, perf counter, busy CPU seconds)."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> _MachineCpu:
        if Path("/proc/stat").exists():
            self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _sample(self) -> None:
        tick = os.sysconf("SC_CLK_TCK")
        while not self._stop.wait(0.05):
            fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
            busy = sum(fields) - fields[3] - fields[4]  # all but idle and iowait
            self.samples.append((time.time(), time.perf_counter(), busy / tick))

    def busy(self, start: float, end: float, clock: str) -> float | None:
        """Cores the machine kept busy from ``start`` to ``end`` (``clock``: "wall" or
        "perf", the clock they were read on)."""
        at = 0 if clock == "wall" else 1
        return _busy_between([(x[at], x[2]) for x in self.samples], start, end)


def _busy_between(samples: list[tuple[float, float]], start: float, end: float) -> float | None:
    """Cores busy between ``start`` and ``end`` by ``samples`` (time, busy CPU seconds so
    far), over the samples inside the span; None with fewer than two."""
    inside = [s for s in samples if start <= s[0] <= end]
    if len(inside) < 2 or inside[-1][0] <= inside[0][0]:
        return None
    return (inside[-1][1] - inside[0][1]) / (inside[-1][0] - inside[0][0])


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def _cpu_seconds() -> float:
    """CPU seconds this process spent so far, every thread's (its services' too)."""
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def _warm(table: Table, batch: Any) -> None:
    """A writer's first write loads its kernels and imports (about 0.5 s on 2 cores; a
    Spark writer's first case ran twice as long as the next, 13-14 s against 5.7-6.6 s):
    an upsert of a few known keys before the clock starts, so that every case measures
    warm writers, as a long-running job's are."""
    table.upsert(batch.slice(0, 10) if isinstance(batch, pa.Table) else batch)


def _process_writer(
    uri: str,
    writer: int,
    keys: int,
    rows: int,
    writes: int,
    go: Any,
    ready: Any,
    of: int = 1,
    ordering: str = "step",
) -> Any:
    """Writer ``writer``'s upserts; ``of`` > 1: the upserts of writers 0 to ``of`` - 1 in
    turn, one writer doing alone what as many would do beside each other."""
    table = Table.open(uri)
    made = [_batches(w, keys, rows, writes) for w in range(writer, writer + of)]
    batches = [b for step in zip(*made, strict=True) for b in step]
    _warm(table, batches[0])
    ready.put(writer)
    go.wait()
    try:
        out = _write_all(table, batches, ordering)
        # perf_counter is per process on some systems: wall time for the run's span, taken
        # before the close, which waits for the services the writes started (a writer's
        # close took up to 3.9 s of a 10 s span of four writers: the span measured the
        # last compaction, not the writes).
        span = out["end"] - out["start"]
        out["end"] = time.time()
        out["start"] = out["end"] - span
    finally:
        closing = time.perf_counter()
        table.close()
    out["close"] = time.perf_counter() - closing
    return out


#: Kinds of a writer-count case besides the writers on one table: one writer doing their
#: writes alone, in turn; each writer on a table of its own.
_ALONE, _OWN = "-alone", "-apart"

#: ``--no-services``: no table service runs (what the writes cost without the compactions,
#: cleans and index compactions they make due, which cost more CPU than the writes here).
NO_SERVICES: dict[str, Any] = {
    "compaction_async": False,
    "compaction_inline": False,
    "log_compaction_enable": False,
    "index_compaction_automatic": False,
    "clean_automatic": False,
    "archive_automatic": False,
}


def _table(
    folder: str,
    n: int,
    keys: int,
    mode: str = "OPTIMISTIC_CONCURRENCY_CONTROL",
    services: bool = True,
    tag: str = "",
) -> str:
    uri = str(Path(folder) / f"writers{n}{tag}-{mode}")
    table = Table.create(
        uri,
        SCHEMA,
        "id",
        "p",
        "v",
        DynamicBucketIndex(max_keys_per_bucket=max(1000, keys // 8)),
        TableOptions(write_concurrency_mode=mode, **({} if services else NO_SERVICES)),
    )
    table.upsert(_rows(np.arange(keys, dtype=np.int64), 0))
    table.wait_for_services()
    table.close()
    return uri


class _Spawned:
    """A call in a process of its own, its result by :meth:`get` (as a pool's
    ``apply_async``). Not a ``multiprocessing.Pool`` worker: those are daemonic, and a
    daemonic writer runs its services in threads instead of the service processes
    (``base/beside.py``), which no writer job does."""

    def __init__(self, ctx: Any, manager: Any, fn: Any, *args: Any) -> None:
        self._results = manager.Queue()
        self._proc = ctx.Process(target=_put_result, args=(self._results, fn, args))
        self._proc.start()

    def get(self, timeout: float) -> Any:
        ok, out = self._results.get(timeout=timeout)
        self.end()
        if not ok:
            raise RuntimeError(out)
        return out

    def end(self) -> None:
        self._proc.join(timeout=60)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()


def _put_result(results: Any, fn: Any, args: tuple[Any, ...]) -> None:
    try:
        results.put((True, fn(*args)))
    except BaseException as e:
        results.put((False, f"{fn.__name__}: {type(e).__name__}: {e}"))
        raise


def _run_processes(
    uris: list[str],
    n: int,
    keys: int,
    rows: int,
    writes: int,
    of: int = 1,
    ordering: str = "step",
) -> list[dict[str, Any]]:
    """``n`` writer processes, writer ``w`` into ``uris[w % len(uris)]`` (``of``:
    :func:`_process_writer`'s)."""
    ctx = mp.get_context("spawn")
    with ctx.Manager() as manager:
        go, ready = manager.Event(), manager.Queue()
        calls = [
            (uris[w % len(uris)], w, keys, rows, writes, go, ready, of, ordering) for w in range(n)
        ]
        pending = [_Spawned(ctx, manager, _process_writer, *call) for call in calls]
        try:
            for _ in range(n):  # every writer opened its table and warmed up
                ready.get(timeout=600)
            go.set()
            return [p.get(timeout=3600) for p in pending]
        finally:
            for p in pending:
                p.end()


def _copy(uri: str, w: int) -> str:
    """A copy of the fresh table at ``uri`` for writer ``w`` alone."""
    to = f"{uri}-own-{w}"
    shutil.copytree(uri, to)
    return to


def _run_threads(
    uri: str, n: int, keys: int, rows: int, writes: int, runtime: Any
) -> list[dict[str, Any]]:
    spark = runtime.spark
    tables = [Table.open(uri, runtime=runtime) for _ in range(n)]
    frames = [
        [spark.createDataFrame(b.to_pandas()) for b in _batches(w, keys, rows, writes)]
        for w in range(n)
    ]
    results: list[dict[str, Any]] = [{} for _ in range(n)]
    for table, made in zip(tables, frames, strict=True):  # as _process_writer's writers
        _warm(table, made[0].limit(10))

    def one(w: int) -> None:
        results[w] = _write_all(tables[w], frames[w])

    threads = [threading.Thread(target=one, args=(w,)) for w in range(n)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        for table in tables:
            table.close()
    if any(not r for r in results):
        raise RuntimeError("a Spark writer thread failed (see its log)")
    return results


def _dies(uri: str, holding: bool, ready: Any) -> None:
    """A writer that begins an instant (and, ``holding``, takes the commit lease naming it,
    as a commit does) and then waits to be killed."""
    from dynbucket.format.timeline.transaction import Transaction

    table = Table.open(uri)
    txn = Transaction.begin(table.store, table.spec, Action.COMMIT, "upsert", hold=False)
    if holding and txn.lock is not None:
        txn.lock.acquire(instant=txn.id)
    ready.set()
    time.sleep(3600)


def killed(folder: str) -> list[Measurement]:
    """The next write's seconds after a writer was SIGKILLed holding the commit lease, and
    in its write, against the same write with nobody killed (default options)."""
    uri = _table(folder, 0, 10_000)
    table = Table.open(uri)
    batch = _rows(np.arange(10_000, 11_000, dtype=np.int64), 1)
    out = []
    try:
        table.upsert(batch)
        for case in ("nobody killed", "killed in its write", "killed holding the commit lease"):
            if case != "nobody killed":
                ctx = mp.get_context("spawn")
                ready = ctx.Event()
                proc = ctx.Process(target=_dies, args=(uri, case.endswith("lease"), ready))
                proc.start()
                ready.wait(120)
                proc.kill()
                proc.join()
            start = time.perf_counter()
            table.upsert(batch)
            out.append(Measurement(case, len(batch), [time.perf_counter() - start]))
    finally:
        table.close()
    return out


def _stream(uri: str, keys: int, go: Any, done: Any, ready: Any) -> list[float]:
    """A stream's micro-batches, one after another; sets ``done`` after the last."""
    table = Table.open(uri)
    batches = _batches(1_000, keys, STREAM_ROWS, STREAM_BATCHES)
    _warm(table, batches[0])
    ready.put("stream")
    go.wait()
    try:
        return list(_write_all(table, batches)["took"])
    finally:
        done.set()
        table.close()


def _backfill(uri: str, keys: int, rows: int, go: Any, done: Any, ready: Any) -> tuple[int, float]:
    """Large upserts into the same partitions until ``done``: (rows written, seconds)."""
    table = Table.open(uri)
    _warm(table, _batches(2_000, keys, rows, 1)[0])
    ready.put("backfill")
    go.wait()
    start, written, step = time.perf_counter(), 0, 0
    try:
        while not done.is_set():
            batch = _batches(2_000 + step, keys, rows * BACKFILL_FACTOR, 1)[0]
            table.upsert(batch)
            written += batch.num_rows
            step += 1
    finally:
        table.close()
    return written, time.perf_counter() - start


def stream_beside_backfill(folder: str, keys: int, rows: int) -> list[Measurement]:
    """The stream's micro-batches alone, then beside a backfill (module doc)."""
    out: list[Measurement] = []
    alone: list[float] = []
    ctx = mp.get_context("spawn")
    for case in ("stream alone", "stream beside a backfill"):
        uri = _table(folder, 100 + len(out), keys)
        with ctx.Manager() as manager:
            go, done, ready = manager.Event(), manager.Event(), manager.Queue()
            stream = _Spawned(ctx, manager, _stream, uri, keys, go, done, ready)
            backfill = None
            if case != "stream alone":
                backfill = _Spawned(ctx, manager, _backfill, uri, keys, rows, go, done, ready)
            for _ in range(1 if backfill is None else 2):  # every process warm
                ready.get(timeout=600)
            go.set()
            took = stream.get(timeout=3600)
            m = Measurement(case, STREAM_ROWS * STREAM_BATCHES, [sum(took)])
            m.extra = {
                "micro-batch p50 s": round(float(np.percentile(took, 50)), 3),
                "micro-batch p99 s": round(float(np.percentile(took, 99)), 3),
            }
            if backfill is None:
                alone = took
            else:
                written, seconds = backfill.get(timeout=3600)
                for q in (50, 99):
                    ratio = np.percentile(took, q) / np.percentile(alone, q)
                    m.extra[f"p{q} vs alone"] = round(float(ratio), 2)
                m.extra["backfill rows/s"] = round(written / seconds)
            out.append(m)
    return out


def run(
    keys: int,
    rows: int,
    writes: int,
    counts: list[int],
    workdir: str | None = None,
    runtime: Any = None,
    services: bool = True,
    ordering: str = "step",
    repeat: int = 1,
) -> dict[str, Any]:
    """Runs the benchmark (``runtime``: Spark writers, module doc; ``services`` False: the
    writer-count cases without table services, ``NO_SERVICES``; ``ordering``: the
    writer-count cases' ordering values, each writer's step or the clock at each write,
    :func:`_write_all`; ``repeat``: runs of every case, one after another in turn, each
    case's median reported) and prints its report."""
    rows_out: list[Measurement] = []
    occ = "OPTIMISTIC_CONCURRENCY_CONTROL"
    # The first run: one writer holding the table for each write (SINGLE_WRITER), what
    # several writers' moment leases, heartbeats and checks cost one writer. In process,
    # each count of several writers runs first with one writer doing all their writes in
    # turn (the same writes alone: a table that takes n times the writes compacts larger
    # slices more often, whoever writes them), then on a table of each writer's own: what
    # the machine allows that many writers at all (module doc), the ceiling of one table's.
    cases = [(1, "SINGLE_WRITER", "")]
    for n in counts:
        if n > 1 and runtime is None:
            cases += [(n, occ, _ALONE), (n, occ, _OWN)]
        cases.append((n, occ, ""))
    with tempfile.TemporaryDirectory(dir=workdir) as folder, _MachineCpu() as machine:
        if runtime is not None:
            # Untimed: the first Spark case ran 1.5-2x the time of the same case run again
            # (2.97 s against 2.12 s, 6 writes), whichever came first: the driver's JVM
            # compiles its hot code over the first writes.
            _run_threads(_table(folder, 0, keys, occ, services), 1, keys, rows, 3, runtime)
        # Runs in turn, every case once a run: a machine that slows for a while slows
        # every case alike (one run of each case, in order, varied 0.86-1.25x for one
        # ratio the same day).
        measured: dict[tuple[int, str, str], list[_Run]] = {case: [] for case in cases}
        for r in range(repeat):
            for n, mode, kind in cases:
                tag = f"{kind}-r{r}" if repeat > 1 else kind
                uri = _table(folder, n, keys, mode, services, tag)
                uris = [uri] + ([_copy(uri, w) for w in range(1, n)] if kind == _OWN else [])
                if kind == _ALONE:
                    done, clock = _run_processes(uris, 1, keys, rows, writes, n, ordering), "wall"
                elif runtime is None:
                    done, clock = _run_processes(uris, n, keys, rows, writes, 1, ordering), "wall"
                else:
                    done, clock = _run_threads(uri, n, keys, rows, writes, runtime), "perf"
                start, end = min(d["start"] for d in done), max(d["end"] for d in done)
                measured[(n, mode, kind)].append(
                    _Run(end - start, done, machine.busy(start, end, clock), clock)
                )
        _Report(rows, writes, runtime is None).add_all(cases, measured, rows_out)
        if runtime is None:
            rows_out += killed(folder)
            rows_out += stream_beside_backfill(folder, keys, rows)
    engine = "spark" if runtime is not None else "in process"
    return print_report(
        f"writers ({engine}{'' if services else ', no services'})",
        "rows",
        rows_out,
        keys=keys,
        rows_per_write=rows,
        writes=writes,
        ordering=ordering,
        runs=repeat,
    )


class _Run(NamedTuple):
    """One run of a case: its span, each writer's :func:`_write_all` result, the machine's
    cores busy over it and its clock."""

    span: float
    done: list[dict[str, Any]]
    machine_busy: float | None
    clock: str


class _Report:
    """The report's row of each case from its runs, against the cases before it."""

    def __init__(self, rows: int, writes: int, in_process: bool) -> None:
        self.rows, self.writes, self.in_process = rows, writes, in_process
        self.base = self.alone = 0.0
        self.apart: dict[int, float] = {}
        self.serial: dict[int, tuple[float, float]] = {}

    def add_all(
        self,
        cases: list[tuple[int, str, str]],
        measured: dict[tuple[int, str, str], list[_Run]],
        out: list[Measurement],
    ) -> None:
        for case in cases:
            out.append(self.row(*case, measured[case]))

    def row(self, n: int, mode: str, kind: str, runs: list[_Run]) -> Measurement:
        total = n * self.writes * self.rows
        done = [d for r in runs for d in r.done]
        writes = n * self.writes * len(runs)
        laps: Counter[str] = Counter()
        for d in done:
            laps.update(d["laps"])
        per_write = {k: round(v / writes, 3) for k, v in sorted(laps.items())}
        p50 = float(np.median([t for d in done for t in d["took"]]))
        single = mode == "SINGLE_WRITER"
        label = " SINGLE_WRITER" if single else {_OWN: f", {n} tables", "": ""}.get(kind, "")
        case = f"1 writer, {n} writers' writes" if kind == _ALONE else f"{n} writer(s){label}"
        m = Measurement(case, total, [r.span for r in runs])
        cpu = sum(d["cpu"] for d in done) if self.in_process else float("nan")
        if single:
            self.alone = m.per_second
        elif not self.base:
            self.base = m.per_second
        if kind == _OWN:
            self.apart[n] = m.per_second
        if kind == _ALONE:
            self.serial[n] = (m.per_second, p50)
        beside = {}
        if n in self.serial and kind == "":
            # Against the same writes by one writer: rows/s, and a write's p50.
            beside = {
                "vs the same writes alone": round(m.per_second / self.serial[n][0], 2),
                "write p50 vs alone": round(p50 / self.serial[n][1], 2),
            }
        busy = [r.machine_busy for r in runs if r.machine_busy is not None]
        m.extra = {
            "rows/s": round(m.per_second),
            "vs 1 writer": round(m.per_second / (self.alone if single else self.base), 2),
            "vs SINGLE_WRITER": round(m.per_second / self.alone, 2),
            **beside,
            # One table's writers against as many writing tables of their own.
            **(
                {"vs own tables": round(m.per_second / self.apart[n], 2)}
                if n in self.apart and kind == ""
                else {}
            ),
            "rows/s per writer": round(m.per_second / (1 if kind == _ALONE else n)),
            "written again": sum(d["conflicts"] for d in done),
            "written again, by cause": dict(sum((Counter(d["causes"]) for d in done), Counter())),
            "writes": writes,
            "write p50 s": round(p50, 3),
            # Cores the writers kept busy (in process: their processes' CPU seconds over
            # the span, their services' threads included, not their service processes;
            # Spark: the work is in other processes, not told), and the machine: one
            # writer's sets what two cores allow several, cores / busy.
            "cores busy": round(cpu / sum(r.span for r in runs), 2),
            "machine cores busy": _rounded(float(np.mean(busy)) if busy else None),
            "cpu s per 1k rows": round(1000 * cpu / (total * len(runs)), 4),
            "seconds per write": per_write,
            # Not in the span: the longest close, waiting for the services the writes
            # started (the tail of work beside the writes, done by whoever runs next).
            "close s": round(max(d.get("close", 0.0) for d in done), 2),
            "clock": runs[0].clock,
        }
        return m
