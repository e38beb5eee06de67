"""The ``dynbucket`` command: demo, ingest, show, compact, check, adopt, rollback, bench."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
from collections.abc import Sequence
from types import FrameType
from typing import TYPE_CHECKING, Any, TextIO

import dynbucket

if TYPE_CHECKING:
    from dynbucket.format.table.spec import TableSpec
    from dynbucket.runtime import Runtime
    from dynbucket.table import Table
    from dynbucket.write.results import WriteResult


def _demo(args: argparse.Namespace) -> int:
    from dynbucket.cli.demo import run_demo
    from dynbucket.runtime import Runtime

    with Runtime() as rt:
        run = run_demo(
            rt, args.path, args.batches, args.rows, args.keys_per_bucket, args.slots, args.png
        )
        run.table.close()
    if args.path is None:  # a temporary folder: the workload and the table go with the run
        shutil.rmtree(run.workdir, ignore_errors=True)
    return 0


def _ingest(args: argparse.Namespace) -> int:
    from dynbucket.cli import ingest, ingest_local
    from dynbucket.console import Progress
    from dynbucket.options import TableOptions
    from dynbucket.runtime import Runtime, spark_parallelism
    from dynbucket.table import Table

    # Everything that can be checked before Ray and Spark start is checked first.
    if args.partial and args.operation != "upsert":
        from dynbucket.base.errors import ConfigError

        raise ConfigError(
            f"--partial with --operation {args.operation}: only an upsert keeps the values "
            "its records leave out; drop --partial or use --operation upsert"
        )
    fmt = ingest.input_format(args.files, args.format)
    ingest.check_header_option(fmt, args.schema, args.header)
    given = ingest.Definition(
        tuple(args.key) if args.key else None,
        tuple(args.partition_by) if args.partition_by is not None else None,
        args.ordering,
        args.table_type,
    )
    spec = ingest.table_definition(args.table, given)
    inferred = args.schema is None and fmt != "parquet"  # a Parquet file's types are its own
    files = ingest.input_files(args.files)
    size = ingest_local.input_bytes(files)
    where = f"{len(files)} file(s), {size / 2**20:,.1f} MB"
    if size < args.local_max_mb * 2**20:
        try:
            with Progress("reading", "files", args.terminal) as progress:
                data = ingest_local.read(
                    files, fmt, args.schema, spec.schema if spec else None, progress, args.header
                )
        except ingest_local.NeedsSpark as e:
            where += f"; {e}"
        else:
            print(f"ingest: in this process ({where}, under --local-max-mb {args.local_max_mb})")
            if spec is None:
                ingest.refuse_text_ordering(
                    ingest_local.spark_type_names(data.schema), args.ordering, fmt, args.schema
                )
                table = Table.create(
                    args.table,
                    ingest.new_table_schema(data.schema, inferred),
                    list(args.key),
                    args.partition_by or (),
                    args.ordering,
                    options=TableOptions(table_type=args.table_type or "MERGE_ON_READ"),
                )
            else:
                table = Table.open(args.table)
            with table:
                # As many slots as the Spark path's writes: the same buckets as it gives.
                _print_written(table, _write(table, args, data, spark_parallelism()))
            return 0
    else:
        where += f", at or over --local-max-mb {args.local_max_mb}"
    print(f"ingest: Spark on Ray ({where})", flush=True)
    with Runtime() as rt:
        table, result = _ingest_on_spark(rt, args, spec, fmt, inferred)
        _print_written(table, result)
    return 0


def _ingest_on_spark(
    rt: Runtime, args: argparse.Namespace, spec: TableSpec | None, fmt: str, inferred: bool
) -> tuple[Table, WriteResult]:
    """``ingest``'s Spark path in a running ``rt``: reads the files with Spark, creates the
    table if ``spec`` is None, writes; an unreadable input is an ``InvalidInputError``."""
    from dynbucket.base.errors import DynBucketError
    from dynbucket.cli import ingest
    from dynbucket.console import Progress, spark_tasks
    from dynbucket.options import TableOptions
    from dynbucket.table import Table

    try:
        df = ingest.read(rt.spark, args.files, fmt, args.schema, spec, args.header)
        if spec is None:
            from pyspark.sql.pandas.types import to_arrow_schema

            ingest.check_new_ordering(df, args.ordering, fmt, args.schema)
            table = Table.create(
                args.table,
                ingest.new_table_schema(to_arrow_schema(df.schema), inferred),
                list(args.key),
                args.partition_by or (),
                args.ordering,
                options=TableOptions(table_type=args.table_type or "MERGE_ON_READ"),
                runtime=rt,
            )
        else:
            table = Table.open(args.table, runtime=rt)
        progress = Progress("ingest", "Spark tasks", args.terminal)
        with table, progress, spark_tasks(rt.spark, progress):
            return table, _write(table, args, df, None)
    except DynBucketError:
        raise
    except Exception as e:
        unreadable = ingest.read_error(e, args.files, fmt)
        if unreadable is None:
            raise
        raise unreadable from e


def _print_written(table: Table, result: WriteResult) -> None:
    """``ingest``'s result, and a line on the keys a delete did not find."""
    print(result)
    if result.keys_not_found:
        where = table.spec.scheme.unique_where
        print(f"{result.keys_not_found:,} key(s) to delete were not found {where}")


def _write(table: Table, args: argparse.Namespace, data: Any, slots: int | None) -> WriteResult:
    """``ingest``'s write of ``data``: its operation (a partial upsert with ``--partial``)."""
    if args.partial:
        return table.upsert(data, slots, partial=True)
    return getattr(table, args.operation)(data, slots)


def _when(instant: str | None) -> str:
    """A 17-digit instant id as a UTC time."""
    if not instant:
        return "never"
    i = instant
    return f"{i[:4]}-{i[4:6]}-{i[6:8]} {i[8:10]}:{i[10:12]}:{i[12:14]}.{i[14:]} UTC ({i})"


def _print_services(table: Any) -> None:
    """Which table services run, and when each last ran (``show``)."""
    from dynbucket.format.timeline.actions import Action

    o = table.spec.options
    timeline = table._timeline
    instants = timeline.instants()

    def last(action: str) -> str:
        done = [i.id for i in instants if i.action == action and i.completed]
        running = [i.id for i in instants if i.action == action and not i.completed]
        return _when(done[-1] if done else None) + (f"; running: {running}" if running else "")

    where = "inline" if o.compaction_inline else "beside the writes"
    on = {True: "", False: " (off)"}
    archived = timeline.archived()
    print("\nservices")
    if o.merge_on_read:
        auto = o.compaction_inline or o.compaction_async
        print(
            f"  compaction        at {o.compaction_delta_commits} logs, {where}{on[auto]}: "
            f"last {last(Action.COMPACTION)}"
        )
        ratio = f"logs under {o.compaction_log_size_ratio:g} of the base"
        print(
            f"  log compaction    {ratio}{on[auto and o.log_compaction_enable]}: "
            f"last {last(Action.LOG_COMPACTION)}"
        )
    print(
        f"  clean             every {o.clean_max_commits} commits, keeping "
        f"{o.cleaner_commits_retained}{on[o.clean_automatic]}: last {last(Action.CLEAN)}"
    )
    print(
        f"  index compaction  at {o.index_compaction_min_files} files"
        f"{on[o.index_compaction_automatic]}: last {last(Action.INDEX_COMPACTION)}"
    )
    if table.spec.table_version >= 8:
        auto = o.metadata_compaction_automatic
        print(
            f"  metadata table    groups compacted {where}{on[auto]}: "
            f"last {last(Action.METADATA_COMPACTION)}"
        )
    print(
        f"  archival          beyond {o.keep_max_commits} instants, down to "
        f"{o.keep_min_commits}{on[o.archive_automatic]}: {archived.instants:,} archived, "
        f"up to {_when(archived.floor or None)}"
    )


def _show(args: argparse.Namespace) -> int:
    from dynbucket.format.file_group import adopted
    from dynbucket.table import Table

    table = Table.open(args.table)
    if args.changes is not None:
        return _print_changes(table, args.changes, args.end, args.last)
    spec = table.spec
    print(f"table      {table.uri}\nid         {spec.table_id}")
    print(f"hudi       {spec.name} ({spec.options.table_type}, table version {spec.table_version})")
    print(
        f"key        {', '.join(spec.record_key)}\npartitions {', '.join(spec.partition_by) or '-'}"
    )
    print(
        f"ordering   {spec.ordering_field or '-'}\nschema     "
        + ", ".join(f"{f.name}: {f.type}" for f in table.schema)
    )
    changes = table.schema_history()
    if len(changes) > 1:  # what each write that evolved it changed
        for (_, old), (instant, new) in zip(changes, changes[1:], strict=False):
            print(f"  evolved  {instant}: {', '.join(_schema_change(old, new))}")
    options = spec.bucket_options.to_properties()
    print("index      " + ", ".join(f"{k}={v}" for k, v in options.items()))
    record = adopted.load(table.store)
    if record.buckets:
        print(f"adopted    from Apache Hudi as of {record.floor} ({len(record.buckets)} groups)")
    stats = table.stats().to_pylist()
    # As wide as the longest partition path, so that long names keep the columns aligned.
    w = max([len("partition"), *(len(r["partition"]) for r in stats)]) + 2
    print(f"\n{'partition':<{w}}{'bucket':>7}{'keys':>12}{'bytes':>14}{'files':>6}")
    for r in stats:
        print(
            f"{r['partition']:<{w}}{r['bucket']:>7}{r['keys']:>12,}{r['bytes']:>14,}{r['files']:>6}"
        )
    _print_services(table)
    print(f"\ntimeline (last {args.last})")
    for row in table.history()[-args.last :]:
        keys = row.get("keys") or {}
        counts = " ".join(f"{k}={v:,}" for k, v in keys.items() if v)
        print(
            f"  {row['instant']}  {row['action']:<16} {row['state']:<10} "
            f"{row.get('operation') or '':<12} files={row.get('files', '-')}  {counts}".rstrip()
        )
    return 0


def _schema_change(old: Any, new: Any) -> list[str]:
    """What changed from schema ``old`` to ``new``: fields added, types promoted."""
    out = []
    for f in new:
        if f.name not in old.names:
            out.append(f"+{f.name}: {f.type}")
        elif old.field(f.name).type != f.type:
            out.append(f"{f.name}: {old.field(f.name).type} -> {f.type}")
    return out


def _print_changes(table: Any, start: str, end: str | None, last: int) -> int:
    """``show --changes``: the records the instants after ``start`` wrote (their latest
    versions: ``Table.changes``), the ``last`` newest of them shown."""
    order = ["_instant", *table.spec.record_key]
    rows = table.changes(start, end).sort_by([(c, "ascending") for c in order]).to_pylist()
    upto = end or table.latest_instant()
    print(f"changes after {start} up to {upto}: {len(rows):,} record(s) (deletes not shown)")
    fields = table.schema.names
    for r in rows[-last:]:
        print(f"  {r['_instant']}  " + "  ".join(f"{f}={r[f]}" for f in fields))
    return 0


def _compact(args: argparse.Namespace) -> int:
    from dynbucket.console import Progress
    from dynbucket.table import Table

    table = Table.open(args.table)
    with Progress("compaction", "file groups", args.terminal) as progress:
        result = table.compact(progress=progress)
    print(result)
    if args.index:
        print(table.compact_index())
    if args.clean:
        print(table.clean())
    return 0


def _check(args: argparse.Namespace) -> int:
    from dynbucket.format.health.check import check
    from dynbucket.format.storage.store import TableStore

    report = check(TableStore.at(args.table))
    print(report)
    return 0 if report.healthy else 1


def _adopt(args: argparse.Namespace) -> int:
    import time

    from dynbucket.format.file_group import adopted
    from dynbucket.table import Table

    if args.undo:
        Table.undo_adoption(args.table)
        print(f"adoption of {args.table} undone: it is the Hudi table it was")
        return 0
    started = time.perf_counter()
    table = Table.adopt(args.table, deduplicate=args.deduplicate)
    record = adopted.load(table.store)
    keys = sum(r["keys"] for r in table.stats().to_pylist())
    print(
        f"adopted {table.uri}: {len(record.buckets)} file group(s) as buckets, "
        f"{keys} key(s) indexed, as of instant {record.floor or '-'}, in "
        f"{time.perf_counter() - started:.1f} s (undo: dynbucket adopt --undo, before "
        "any write)"
    )
    done = record.deduplicated
    if done:
        print(
            f"deduplicated: {done['keys']} key(s) had more than one live row; "
            f"{done['rows']} row(s) removed from {done['groups']} file group(s) in instant "
            f"{done['instant']} (kept: each key's largest ordering value, ties the latest "
            "commit; a Hudi commit, which undo does not remove: time travel before it "
            "still reads the removed rows until they are cleaned)"
        )
    if record.metadata_kept:
        print(f"metadata table kept in step: {', '.join(record.metadata_kept)}")
    for partition, why in sorted(record.metadata_removed.items()):
        print(f"metadata table partition {partition} removed (undo restores it): {why}")
    table.close()
    return 0


def _rollback(args: argparse.Namespace) -> int:
    from dynbucket.table import Table

    rolled = Table.open(args.table).rollback()
    print(f"rolled back {len(rolled)} pending instant(s): {', '.join(rolled) or '-'}")
    return 0


def _bench_datapath(args: argparse.Namespace) -> int:
    from dynbucket.bench import datapath
    from dynbucket.runtime import Runtime

    with Runtime() as rt:
        datapath.run(rt, args.sizes, args.runs, args.cases or datapath.CASES)
    return 0


def _bench_read(args: argparse.Namespace) -> int:
    from dynbucket.bench import read

    read.run(args.rows, args.runs, args.workdir)
    return 0


def _bench_global(args: argparse.Namespace) -> int:
    from dynbucket.bench import global_index

    global_index.run(args.keys, args.partitions, args.runs, args.workdir, args.keep)
    return 0


def _bench_writers(args: argparse.Namespace) -> int:
    from dynbucket.bench import writers

    services = not args.no_services
    shape = (args.keys, args.rows, args.writes, args.counts, args.workdir)
    if not args.spark:
        writers.run(*shape, None, services, args.ordering, args.runs)
        return 0
    from dynbucket.runtime import Runtime

    with Runtime() as rt:
        writers.run(*shape, rt, services, args.ordering, args.runs)
    return 0


def _bench_assigner(args: argparse.Namespace) -> int:
    from dynbucket.bench import assigner

    assigner.run(args.keys, args.runs, not args.no_actor, args.workdir)
    return 0


def _bench_upsert(args: argparse.Namespace) -> int:
    from dynbucket.bench import upsert
    from dynbucket.runtime import Runtime

    with Runtime() as rt:
        result = upsert.run(
            rt,
            args.sizes,
            args.upsert_rows,
            args.runs,
            args.systems,
            args.workdir,
            args.bucket_rows,
            args.paimon_max,
        )
    if args.guard is None:
        return 0
    from dynbucket.bench import guard

    failures = guard.check(result, guard.load(args.guard))
    for line in failures:  # on stdout: a quiet bench sends stderr to its log file
        print(f"guard: {line}")
    print(f"guard: {'FAILED' if failures else 'passed'} against {args.guard}")
    return 1 if failures else 0


def _bench_latency(args: argparse.Namespace) -> int:
    from dynbucket.bench import latency
    from dynbucket.runtime import Runtime

    with Runtime() as rt:
        latency.run(
            rt,
            args.table_rows,
            args.sizes,
            args.runs,
            args.idle,
            args.systems,
            args.workdir,
            args.bucket_rows,
        )
    return 0


def _bench_scale(args: argparse.Namespace) -> int:
    from dynbucket.bench import scale
    from dynbucket.runtime import Runtime

    with Runtime(driver_write_max_bytes=0) as rt:  # every write by Spark tasks and slots
        scale.run(
            rt, args.rows, args.upsert_rows, args.runs, args.slots, args.bucket_rows, args.workdir
        )
    return 0


def _bench_start(args: argparse.Namespace) -> int:
    from dynbucket.bench import start

    start.run(args.keys, args.workdir)
    return 0


def _bench_soak(args: argparse.Namespace) -> int:
    from dynbucket.bench import soak
    from dynbucket.runtime import Runtime

    if not args.stream_batches:
        soak.run(
            None,
            args.writes,
            args.rows,
            args.window,
            0,
            0,
            args.workdir,
            args.png,
            args.table_versions,
        )
        return 0
    with Runtime() as rt:
        soak.run(
            rt,
            args.writes,
            args.rows,
            args.window,
            args.stream_batches,
            args.stream_window,
            args.workdir,
            args.png,
            args.table_versions,
        )
    return 0


def _bench_crash(args: argparse.Namespace) -> int:
    from dynbucket.bench import crash

    summary = crash.run(args.rounds, args.seed, args.workdir)
    return 0 if summary["rounds_ok"] == summary["rounds"] else 1


def _bench_adopt(args: argparse.Namespace) -> int:
    from dynbucket.bench import adopt

    adopt.run(args.keys, args.runs, args.workdir)
    return 0


def _bench_compaction(args: argparse.Namespace) -> int:
    from dynbucket.bench import compaction

    compaction.run(args.rows, args.upsert_rows, args.runs, args.workdir)
    return 0


def _bench_schemes(args: argparse.Namespace) -> int:
    from dynbucket.bench import schemes
    from dynbucket.runtime import Runtime

    with Runtime(driver_write_max_bytes=0) if args.spark_tasks else Runtime() as rt:
        schemes.run(rt, args.base_rows, args.capacity, args.schemes, args.workdir, args.png)
    return 0


def _count(text: str) -> int:
    return int(float(text))


def _names(text: str) -> list[str]:
    """A comma-separated list of field names (one option value, so that it never takes the
    positional arguments after it: ``--key id,region t data.csv``)."""
    return [n.strip() for n in text.split(",") if n.strip()]


#: What ``dynbucket --help`` says first (the module doc is for the code's readers).
_DESCRIPTION = (
    "Streaming upserts into Apache Hudi tables with a dynamic bucket index. Commands: demo, "
    "ingest, show, compact, check, adopt, rollback, bench; `dynbucket COMMAND --help` for each."
)
_TABLE_HELP = "the table's folder or URI (e.g. /data/t, s3://bucket/t)"


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A plain SIGTERM (timeout, kill, CI) would skip every `finally` and leave Ray's and
    # Spark's processes behind; as SystemExit it unwinds through Runtime.stop().
    sys.exit(128 + signum)


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="dynbucket", description=_DESCRIPTION)
    p.add_argument("--version", action="version", version=f"dynbucket {dynbucket.__version__}")
    verbose_help = "show Ray's, Spark's and the JVM's output here (default: a log file)"
    p.add_argument("--verbose", action="store_true", help=verbose_help)
    loud = argparse.ArgumentParser(add_help=False)
    loud.add_argument(
        "--verbose", action="store_true", default=argparse.SUPPRESS, help=verbose_help
    )
    sub = p.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="stream a synthetic workload into a table (embedded runtime)",
        parents=[loud],
    )
    demo.add_argument("--path", help="folder for the workload, table and PNG (default: temporary)")
    demo.add_argument("--batches", type=int, default=12, help="micro-batches (default 12)")
    demo.add_argument("--rows", type=_count, default=40_000, help="records per micro-batch")
    demo.add_argument("--keys-per-bucket", type=_count, default=25_000, help="bucket capacity")
    demo.add_argument("--slots", type=int, default=None, help="assigner slots (default: cores)")
    demo.add_argument("--png", default=None, help="where to save the PNG ('' for none)")
    demo.set_defaults(func=_demo)

    from dynbucket.cli.ingest_local import LOCAL_MAX_MB

    ingest = sub.add_parser(
        "ingest", help="write Parquet / CSV / JSON files into a table", parents=[loud]
    )
    ingest.add_argument("table", help=_TABLE_HELP + "; created when --key is given")
    ingest.add_argument("files", nargs="+", help="the input files (or folders of them)")
    ingest.add_argument(
        "--format",
        choices=["parquet", "csv", "json"],
        default=None,
        help="the files' format (default: from their names)",
    )
    ingest.add_argument(
        "--schema",
        default=None,
        help="the files' columns as Spark DDL, e.g. 'id string, ts bigint' "
        "(default: the table's, or inferred for a new table)",
    )
    ingest.add_argument(
        "--no-header",
        dest="header",
        action="store_false",
        help="CSV files without a header line: columns by position, as --schema names them "
        "(default: a header line, columns by its names)",
    )
    ingest.add_argument(
        "--operation",
        choices=["upsert", "insert", "delete"],
        default="upsert",
        help="upsert (default): insert new keys, update known ones; insert: refuse known "
        "keys; delete: delete the files' keys",
    )
    ingest.add_argument(
        "--partial",
        action="store_true",
        help="the files carry only some fields (key, partition, ordering and those that "
        "changed): known keys keep the table's values of the others (upsert only)",
    )
    ingest.add_argument(
        "--key",
        type=_names,
        action="extend",
        help="record key field(s), comma-separated (id or id,region): create the table if absent",
    )
    ingest.add_argument(
        "--partition-by",
        type=_names,
        action="extend",
        help="partition field(s) of a new table, comma-separated ('' for none; default: none)",
    )
    ingest.add_argument("--ordering", help="ordering field (larger wins)")
    ingest.add_argument(
        "--table-type",
        choices=["MERGE_ON_READ", "COPY_ON_WRITE"],
        default=None,
        help="Hudi table type of a new table (default MERGE_ON_READ)",
    )
    ingest.add_argument(
        "--local-max-mb",
        type=float,
        default=LOCAL_MAX_MB,
        help="inputs smaller than this are read with pyarrow and written in this process, "
        f"without Ray and Spark (default {LOCAL_MAX_MB}; 0: always Spark)",
    )
    ingest.set_defaults(func=_ingest)

    show = sub.add_parser("show", help="a table: properties, buckets, timeline")
    show.add_argument("table", help=_TABLE_HELP)
    show.add_argument(
        "--last", type=int, default=10, help="instants of the timeline (or changes) to show"
    )
    show.add_argument(
        "--changes",
        metavar="START",
        help="show instead the records the instants after START changed (an incremental read)",
    )
    show.add_argument("--end", help="with --changes: up to this instant (default: the latest)")
    show.set_defaults(func=_show)

    compact = sub.add_parser("compact", help="compact file slices (and the index, and clean)")
    compact.add_argument("table", help=_TABLE_HELP)
    compact.add_argument("--index", action="store_true", help="also compact the index")
    compact.add_argument("--clean", action="store_true", help="also clean old file slices")
    compact.set_defaults(func=_compact)

    checked = sub.add_parser("check", help="is the table whole? (exit 1 when not)")
    checked.add_argument("table", help=_TABLE_HELP)
    checked.set_defaults(func=_check)

    adopting = sub.add_parser(
        "adopt", help="make a table Apache Hudi wrote a dynbucket table, in place"
    )
    adopting.add_argument("table", help=_TABLE_HELP)
    adopting.add_argument(
        "--deduplicate",
        action="store_true",
        help="a key with more than one live row keeps its row with the largest ordering "
        "value (ties: the latest commit); the others are removed in one commit",
    )
    adopting.add_argument(
        "--undo",
        action="store_true",
        help="undo the adoption of TABLE (before any write since): its properties and "
        "metadata table as they were, .hoodie/.dynbucket/ gone",
    )
    adopting.set_defaults(func=_adopt)

    rollback = sub.add_parser("rollback", help="roll back instants a dead writer left")
    rollback.add_argument("table", help=_TABLE_HELP)
    rollback.set_defaults(func=_rollback)

    bench = sub.add_parser(
        "bench", help="benchmarks (side by side in one run, medians)", parents=[loud]
    )
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    dp = bench_sub.add_parser(
        "datapath", help="Spark -> actors -> Spark: the ways rows travel", parents=[loud]
    )
    dp.add_argument(
        "--sizes",
        type=lambda t: [_count(x) for x in t.split(",")],
        default=[1_000_000, 5_000_000],
        help="rows per run, comma-separated (default 1e6,5e6)",
    )
    dp.add_argument("--runs", type=int, default=3, help="runs per case (median; default 3)")
    dp.add_argument(
        "--cases", type=lambda t: t.split(","), default=None, help="cases to run (default: all)"
    )
    dp.set_defaults(func=_bench_datapath)
    rd = bench_sub.add_parser(
        "read", help="snapshot read vs plain Parquet; RLI bulk read", parents=[loud]
    )
    rd.add_argument("--rows", type=_count, default=5_000_000, help="rows of the table")
    rd.add_argument("--runs", type=int, default=3, help="reads per case (median; default 3)")
    rd.add_argument("--workdir", default=None, help="where to build the tables (temporary)")
    rd.set_defaults(func=_bench_read)
    asg = bench_sub.add_parser(
        "assigner", help="the assigner core on one 10M-key partition", parents=[loud]
    )
    asg.add_argument("--keys", type=_count, default=10_000_000, help="keys assigned (default 1e7)")
    asg.add_argument("--runs", type=int, default=3, help="runs per case (median; default 3)")
    asg.add_argument("--no-actor", action="store_true", help="skip the Ray actor case")
    asg.add_argument("--workdir", default=None, help="where to build the index (temporary)")
    asg.set_defaults(func=_bench_assigner)
    glb = bench_sub.add_parser(
        "global",
        help="a global index's slot against the partition-scoped one (memory, bootstrap, "
        "lookups, inserts)",
        parents=[loud],
    )
    glb.add_argument("--keys", type=_count, default=10_000_000, help="keys of the table")
    glb.add_argument("--partitions", type=int, default=100, help="partitions they spread over")
    glb.add_argument("--runs", type=int, default=3, help="runs per case (median; default 3)")
    glb.add_argument("--workdir", default=None, help="where to build the table (temporary)")
    glb.add_argument("--keep", default=None, help="build the table here once and keep it")
    glb.set_defaults(func=_bench_global)
    wrt = bench_sub.add_parser(
        "writers",
        help="1, 2 and 4 writers into one table at once (several writers: throughput, "
        "conflicts, where the time goes)",
        parents=[loud],
    )
    wrt.add_argument("--keys", type=_count, default=200_000, help="keys in the table first")
    wrt.add_argument("--rows", type=_count, default=20_000, help="rows per write")
    wrt.add_argument("--writes", type=int, default=10, help="writes per writer")
    wrt.add_argument(
        "--runs",
        type=int,
        default=3,
        help="runs of every case, in turn (each case's median; default 3)",
    )
    wrt.add_argument(
        "--counts",
        type=lambda t: [int(x) for x in t.split(",")],
        default=[1, 2, 4],
        help="writer counts, side by side",
    )
    wrt.add_argument("--spark", action="store_true", help="Spark writers (threads of one driver)")
    wrt.add_argument(
        "--no-services",
        action="store_true",
        help="no table services (compaction, clean, index compaction): the writes alone",
    )
    wrt.add_argument(
        "--ordering",
        choices=("step", "clock"),
        default="step",
        help="the ordering values: each writer's step (writers fall behind each other: "
        "their updates lose and are counted stale) or the clock at each write (a stream's "
        "event times)",
    )
    wrt.add_argument("--workdir", default=None, help="where to write the tables (temporary)")
    wrt.set_defaults(func=_bench_writers)
    up = bench_sub.add_parser(
        "upsert", help="1M-row upserts into 5M/50M-row tables vs peers", parents=[loud]
    )
    up.add_argument(
        "--sizes",
        type=lambda t: [_count(x) for x in t.split(",")],
        default=[5_000_000, 50_000_000],
        help="table sizes (rows)",
    )
    up.add_argument("--upsert-rows", type=_count, default=1_000_000, help="rows per upsert")
    up.add_argument("--runs", type=int, default=3, help="steady-state upserts (median)")
    up.add_argument(
        "--systems",
        type=lambda t: t.split(","),
        default=["dynbucket", "dynbucket-nometa", "spark", "inprocess", "floor", "delta", "paimon"],
        help="comma-separated: dynbucket, dynbucket-nometa, spark, inprocess, floor, delta, "
        "paimon; also inprocess-partial (the in-process upserts without one field, "
        "partial=True), dynbucket-v9 and inprocess-v9 (a table of version 9, with Hudi's "
        "metadata table), dynbucket-two-stage (the Spark job in two Python stages)",
    )
    up.add_argument(
        "--bucket-rows",
        type=_count,
        default=1_000_000,
        help="bucket capacity, for dynbucket and Paimon alike",
    )
    up.add_argument(
        "--paimon-max",
        type=_count,
        default=5_000_000,
        help="largest table pypaimon is run on (it loads ~20k rows/s)",
    )
    up.add_argument("--workdir", default=None, help="where workloads and tables go (temporary)")
    up.add_argument(
        "--guard",
        default=None,
        metavar="KEPT_JSON",
        help="exit 1 when a ratio this run measured is more than 15%% worse than the one kept "
        "in KEPT_JSON (docs/bench-kept.json: the main job's speed, guarded)",
    )
    up.set_defaults(func=_bench_upsert)
    lat = bench_sub.add_parser(
        "latency", help="small upserts: first, warm, after idle, vs peers", parents=[loud]
    )
    lat.add_argument("--table-rows", type=_count, default=5_000_000, help="rows of the table")
    lat.add_argument(
        "--sizes",
        type=lambda t: [_count(x) for x in t.split(",")],
        default=[1_000, 10_000, 100_000],
        help="rows per upsert",
    )
    lat.add_argument("--runs", type=int, default=5, help="writes per cell (median)")
    lat.add_argument(
        "--idle", type=float, default=120.0, help="seconds without a write before each 'idle' write"
    )
    lat.add_argument(
        "--systems",
        type=lambda t: t.split(","),
        default=["dynbucket", "spark", "delta", "paimon"],
        help="comma-separated: dynbucket, spark, delta, paimon",
    )
    lat.add_argument(
        "--bucket-rows",
        type=_count,
        default=1_000_000,
        help="bucket capacity, for dynbucket and Paimon alike",
    )
    lat.add_argument("--workdir", default=None, help="where workloads and tables go (temporary)")
    lat.set_defaults(func=_bench_latency)
    eng = bench_sub.add_parser(
        "schemes",
        aliases=["engines"],  # its name before 0.2
        help="every bucket scheme on one growing, skewed workload",
        parents=[loud],
    )
    eng.add_argument(
        "--base-rows",
        type=_count,
        default=100_000,
        help="keys of the first upsert (the table ends 10x larger)",
    )
    eng.add_argument("--capacity", type=_count, default=50_000, help="keys per bucket")
    eng.add_argument(
        "--schemes",
        type=lambda t: t.split(","),
        default=["dynamic", "simple", "simple-partition", "consistent"],
        help="bucket schemes, comma-separated (default: all four)",
    )
    eng.add_argument(
        "--spark-tasks",
        action="store_true",
        help="every upsert by Spark tasks (default: small ones by the driver)",
    )
    eng.add_argument("--png", default=None, help="where the PNG goes (default: the workdir)")
    eng.add_argument("--workdir", default=None, help="where workloads and tables go (temporary)")
    eng.set_defaults(func=_bench_schemes)
    comp = bench_sub.add_parser(
        "compaction",
        help="compaction of a large table: groups as parallel tasks, and in driver threads",
        parents=[loud],
    )
    comp.add_argument("--rows", type=_count, default=50_000_000, help="rows of the table")
    comp.add_argument("--upsert-rows", type=_count, default=1_000_000, help="updates per run")
    comp.add_argument("--runs", type=int, default=3, help="compactions of each kind")
    comp.add_argument("--workdir", default=None, help="where the table goes (temporary)")
    comp.set_defaults(func=_bench_compaction)
    ado = bench_sub.add_parser(
        "adopt",
        help="adopting a Hudi 1.x table: its keys' index from the rows or its record index",
        parents=[loud],
    )
    ado.add_argument("--keys", type=_count, default=1_000_000, help="keys of the table")
    ado.add_argument("--runs", type=int, default=5, help="runs of each case")
    ado.add_argument("--workdir", default=None, help="where the table goes (temporary)")
    ado.set_defaults(func=_bench_adopt)

    sta = bench_sub.add_parser(
        "start",
        help="a driver script's first results: Runtime() to the first upserts, a small "
        "createDataFrame delete, the first reads",
        parents=[loud],
    )
    sta.add_argument("--keys", type=_count, default=1_000, help="keys written (default 1e3)")
    sta.add_argument("--workdir", default=None, help="where the tables go (temporary)")
    sta.set_defaults(func=_bench_start)
    soak = bench_sub.add_parser(
        "soak",
        help="many small upserts and a long stream: write and read cost over the run",
        parents=[loud],
    )
    soak.add_argument("--writes", type=_count, default=10_000, help="in-process upserts")
    soak.add_argument("--rows", type=_count, default=2_000, help="rows per upsert / batch")
    soak.add_argument("--window", type=int, default=500, help="writes per reported window")
    soak.add_argument(
        "--stream-batches", type=_count, default=1_000, help="micro-batches of the stream (0: none)"
    )
    soak.add_argument("--stream-window", type=int, default=100, help="batches per window")
    soak.add_argument(
        "--table-versions",
        type=lambda t: tuple(int(x) for x in t.split(",")),
        default=(6,),
        help="Hudi table versions of the in-process run, one run each (6,9: the cost of "
        "Hudi's metadata table)",
    )
    soak.add_argument("--png", default=None, help="where the PNG goes (default: the workdir)")
    soak.add_argument("--workdir", default=None, help="where the tables go (temporary)")
    soak.set_defaults(func=_bench_soak)
    crash = bench_sub.add_parser(
        "crash",
        help="writers and service processes killed or paused at random; the table whole after each",
        parents=[loud],
    )
    crash.add_argument("--rounds", type=_count, default=100, help="rounds (a fault each)")
    crash.add_argument("--seed", type=int, default=7, help="seed of the faults and their times")
    crash.add_argument("--workdir", default=None, help="where the table goes (temporary)")
    crash.set_defaults(func=_bench_crash)
    sc = bench_sub.add_parser(
        "scale",
        help="a 1M upsert into a 200M-row table vs 5M rows; bootstrap, memory per key, slices",
        parents=[loud],
    )
    sc.add_argument(
        "--rows",
        type=_count,
        default=200_000_000,
        help="rows (keys) of the large table, in two partitions",
    )
    sc.add_argument("--upsert-rows", type=_count, default=1_000_000, help="rows per upsert")
    sc.add_argument("--runs", type=int, default=3, help="steady-state upserts and bootstraps")
    sc.add_argument("--slots", type=int, default=2, help="assigner slots of the writes")
    sc.add_argument("--bucket-rows", type=_count, default=1_000_000, help="keys per bucket")
    sc.add_argument("--workdir", default=None, help="where workloads and tables go (temporary)")
    sc.set_defaults(func=_bench_scale)
    return p


#: Commands that start Ray and Spark: their console shows only dynbucket's own output.
RUNTIME_COMMANDS = ("demo", "ingest", "bench")


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    args = parser().parse_args(argv)
    if args.verbose or args.command not in RUNTIME_COMMANDS:
        return _run(args, sys.stderr)
    from dynbucket.console import log_path, quiet

    path = log_path(args.command if args.command != "bench" else f"bench-{args.bench}")
    # The process exits after the command: its output stays on the log to the end.
    with quiet(path, restore=False) as terminal:
        try:
            return _run(args, terminal)
        finally:
            if path.exists() and path.stat().st_size == 0:
                path.unlink()
            elif path.exists():
                print(
                    f"(Ray, Spark and JVM output: {path}; --verbose shows it here)", file=terminal
                )
            terminal.flush()


def _run(args: argparse.Namespace, errors: TextIO) -> int:
    from dynbucket.base.errors import DynBucketError

    args.terminal = errors  # progress reports go where dynbucket's messages go
    try:
        return int(args.func(args))
    except DynBucketError as e:
        # The message names the field, the value and the fix; a traceback adds nothing.
        print(f"dynbucket {args.command}: {type(e).__name__}: {e}", file=errors)
        return 2


if __name__ == "__main__":
    sys.exit(main())
