"""The README's main command, run as a user runs it, leaves no process behind."""

from __future__ import annotations

import re
from pathlib import Path

import pyarrow as pa
import pytest

from tests.integration.processes import marked_env, run, tool, wait_until_gone


def test_demo_streams_prints_layout_saves_png_and_leaves_no_process(tmp_path: Path) -> None:
    env, marker = marked_env()
    png = tmp_path / "layout.png"
    done = run(
        [
            tool("dynbucket"),
            "demo",
            "--path",
            str(tmp_path / "demo"),
            "--batches",
            "3",
            "--rows",
            "3000",
            "--keys-per-bucket",
            "1000",
            "--png",
            str(png),
        ],
        env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "final bucket layout (capacity 1,000 keys per bucket)" in done.stdout
    assert foreign(done.stdout + done.stderr) == []  # Ray's, Spark's, the JVM's: in the log
    log = _log_named(done.stderr)
    assert foreign(log.read_text(errors="replace")) != []  # ... which the demo names
    batch_lines = [line for line in done.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert len(batch_lines) >= 3
    assert png.stat().st_size > 10_000 and png.read_bytes()[:4] == b"\x89PNG"
    # Updates draw earlier keys at random, some twice: fewer rows than records, said why.
    said = re.search(r"^9,000 records, ([\d,]+) rows written: ", done.stdout, re.M)
    assert said and int(said.group(1).replace(",", "")) < 9_000, done.stdout
    assert wait_until_gone(marker) == []
    # hudi-rs reads the demo's table with as many rows as `dynbucket show` counts keys.
    [line] = [x for x in done.stdout.splitlines() if x.startswith("read back with hudi-rs:")]
    hudi_rows = int(line.split(":")[1].split()[0].replace(",", ""))
    shown = run([tool("dynbucket"), "show", str(tmp_path / "demo" / "table")], env)
    assert shown.returncode == 0, shown.stderr[-3000:]
    keys = sum(
        int(x.split()[2].replace(",", ""))
        for x in shown.stdout.splitlines()
        if x.startswith("region=") and len(x.split()) == 5
    )
    assert hudi_rows == keys == 3000 + 2 * 2100  # 30% of each later batch updates old keys


@pytest.mark.sample(2, family="a whole job as its user runs it")
def test_ingest_show_compact_rollback(tmp_path: Path) -> None:
    from dynbucket.table import Table

    table = str(tmp_path / "t")
    day1, day2 = tmp_path / "day1.csv", tmp_path / "day2.csv"
    day1.write_text("id,day,v,ts\n" + "".join(f"k{i},d{i % 2},{i},1\n" for i in range(40)))
    day2.write_text("id,day,v,ts\nk1,d1,100,2\nk2,d0,200,0\nk40,d0,40,2\n")
    env, marker = marked_env()
    dynbucket = tool("dynbucket")

    # No table there and no --key: a clear error, no traceback, nothing written.
    refused = run([dynbucket, "ingest", table, str(day1), "--format", "csv"], env)
    assert refused.returncode == 2
    assert "NotATableError" in refused.stderr and "Traceback" not in refused.stderr
    assert not Path(table).exists()

    created = run(
        [
            dynbucket,
            "ingest",
            table,
            str(day1),
            "--format",
            "csv",
            "--key",
            "id",
            "--partition-by",
            "day",
            "--ordering",
            "ts",
            "--local-max-mb",
            "0",
        ],
        env,
    )
    assert created.returncode == 0, created.stderr[-3000:]
    assert created.stdout.startswith("ingest: Spark on Ray (1 file(s), 0.0 MB, at or over")
    assert "40 inserted (40 rows in" in created.stdout
    # A small input is written in this process, into the table the Spark path created.
    updated = run([dynbucket, "ingest", table, str(day2), "--format", "csv"], env)
    assert updated.returncode == 0, updated.stderr[-3000:]
    assert updated.stdout.startswith("ingest: in this process (1 file(s), 0.0 MB, under")
    # k2 came with an older ts: it loses
    assert ": 1 inserted, 1 updated, 1 stale (" in updated.stdout
    assert wait_until_gone(marker) == []  # each ingest stopped its Ray and Spark

    live = {r["id"]: r["v"] for r in Table.open(table).to_arrow().to_pylist()}
    assert (len(live), live["k1"], live["k2"], live["k40"]) == (41, 100, 2, 40)  # k2: older ts

    # show, check, compact and rollback start neither Spark (no Java here) nor Ray (no
    # cluster at that address): each would fail if it tried.
    env = {**env, "JAVA_HOME": str(tmp_path / "no-java"), "RAY_ADDRESS": "127.0.0.1:9"}
    compacted = run([dynbucket, "compact", table, "--index", "--clean"], env)
    assert compacted.returncode == 0, compacted.stderr[-3000:]
    shown = run([dynbucket, "show", table], env)
    assert shown.returncode == 0, shown.stderr[-3000:]
    assert "day=d0" in shown.stdout and "day=d1" in shown.stdout
    assert "compaction" in shown.stdout and shown.stdout.count(" deltacommit ") == 2
    # Which services run and when each last ran: compaction just ran (by hand).
    services = shown.stdout.split("services\n", 1)[1].split("\n\n", 1)[0]
    assert "at 5 logs, beside the writes: last 20" in services
    assert "log compaction    logs under 0.2 of the base: last never" in services
    assert "archival          beyond 30 instants, down to 20: 0 archived" in services
    assert "inserted=1 updated=1 stale=1" in shown.stdout  # the second ingest's keys
    checked = run([dynbucket, "check", table], env)
    assert checked.returncode == 0, checked.stdout + checked.stderr[-3000:]
    rolled = run([dynbucket, "rollback", table], env)
    assert rolled.returncode == 0 and "rolled back 0 pending instant(s)" in rolled.stdout
    assert {r["id"]: r["v"] for r in Table.open(table).to_arrow().to_pylist()} == live


#: Lines Ray, Spark and the JVM write (start-up chatter, log lines, stack traces).
FOREIGN = re.compile(
    r"gcs_client|raylet|\(pid=|WARN |INFO |ERROR |StatusConsoleListener|"
    r"log4j|Setting default log level|sc\.setLogLevel|NativeCodeLoader|"
    r"^\s+at [\w$.]+\(|Exception in task|Traceback"
)


def foreign(text: str) -> list[str]:
    return [line for line in text.splitlines() if FOREIGN.search(line)]


def _log_named(text: str) -> Path:
    [path] = re.findall(r"Ray, Spark and JVM output: (\S+);", text)
    return Path(path)


def test_ingest_checks_its_inputs_before_starting_anything(tmp_path: Path) -> None:
    """With no Java to be found, any start of Ray and Spark would fail with
    JavaNotFoundError: each of these is refused by its own one-line error first."""
    from dynbucket.table import Table

    table = str(tmp_path / "t")
    Table.create(
        table, pa.schema([("id", pa.string()), ("ts", pa.int64())]), "id", ordering_field="ts"
    )
    (tmp_path / "rows.csv").write_text("id,ts\na,1\n")
    env, _ = marked_env({"JAVA_HOME": str(tmp_path / "no-java")})
    cases = [
        ([str(tmp_path / "missing.csv")], "InvalidInputError: input .*missing.csv' does not exist"),
        (
            [str(tmp_path / "rows.csv"), "--format", "parquet"],
            "InvalidInputError: .*rows.csv' is not a Parquet file .*give --format csv",
        ),
        (
            [str(tmp_path / "rows.csv"), "--key", "ts"],
            "ConfigError: --key ts disagrees with the table at .*, whose value is id",
        ),
        ([str(tmp_path / "rows.csv"), "--ordering", "id"], "ConfigError: --ordering id disagrees"),
    ]
    for args, message in cases:
        done = run([tool("dynbucket"), "ingest", table, *args], env, timeout=120)
        assert done.returncode == 2, done.stderr
        assert re.fullmatch(f"dynbucket ingest: {message}.*\n", done.stderr), done.stderr
        assert done.stdout == ""


@pytest.mark.sample(2, family="a whole job as its user runs it")
def test_a_bad_csv_is_one_line_and_a_new_text_ordering_is_refused(tmp_path: Path) -> None:
    from dynbucket.table import Table

    table = str(tmp_path / "t")
    Table.create(
        table, pa.schema([("id", pa.string()), ("ts", pa.int64())]), "id", ordering_field="ts"
    )
    (tmp_path / "bad.csv").write_text("id,ts\na,1\nb,two\n")
    (tmp_path / "text.csv").write_text("id,ts\na,ten\nb,nine\n")
    env, marker = marked_env()
    # The Spark path's refusal: tests/integration/test_ingest_paths.py, in the suite's session.
    # In process, the same refusal in one line, before anything is written.
    local = run([tool("dynbucket"), "ingest", table, str(tmp_path / "bad.csv")], env)
    assert local.returncode == 2 and local.stdout == ""
    assert re.fullmatch(
        r"dynbucket ingest: InvalidInputError: could not read .*bad.csv as csv: .*'two'; "
        r"check the files, --format and --schema\n",
        local.stderr,
    ), local.stderr
    assert Table.open(table).history() == []
    new = run(
        [
            tool("dynbucket"),
            "ingest",
            str(tmp_path / "t2"),
            str(tmp_path / "text.csv"),
            "--key",
            "id",
            "--ordering",
            "ts",
        ],
        env,
    )
    assert new.returncode == 2
    assert "ConfigError: --ordering ts: the CSV column 'ts' was read as text" in new.stderr
    assert "--schema 'id string, ts bigint'" in new.stderr
    assert not (tmp_path / "t2").exists()
    typed = run(
        [
            tool("dynbucket"),
            "ingest",
            str(tmp_path / "t2"),
            str(tmp_path / "text.csv"),
            "--key",
            "id",
            "--ordering",
            "ts",
            "--schema",
            "id string, ts string",
        ],
        env,
    )
    assert typed.returncode == 0, typed.stderr[-3000:]
    assert Table.open(str(tmp_path / "t2"))._spec.schema.field("ts").type == pa.string()
    assert wait_until_gone(marker) == []


def test_demo_layouts_do_not_race_the_clean(runtime, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    # A clean after every commit that keeps one instant: the early instants' slices are gone
    # by the end of the stream, so the PNG's layouts must be the ones taken as batches ended.
    import io

    from dynbucket.cli.demo import run_demo
    from dynbucket.options import TableOptions

    options = TableOptions(cleaner_commits_retained=1, clean_max_commits=1, compaction_async=False)
    png = tmp_path / "layout.png"
    out = io.StringIO()
    run = run_demo(runtime, str(tmp_path / "demo"), 4, 400, 100, 2, str(png), out, options)
    try:
        assert [b for b, _ in run.layouts] == [b for b, r, _ in run.results if r.instant]
        assert len(run.layouts) == 4
        # Each layout is its batch's: the keys grow by the batch's new keys.
        keys = [sum(layout.column("keys").to_pylist()) for _, layout in run.layouts]
        rli = tmp_path / "demo" / "table" / ".hoodie" / ".dynbucket" / "rli"
        files = sorted(str(f.relative_to(rli)) for f in rli.rglob("*.parquet"))
        history = [(h["instant"], h["action"], h["state"]) for h in run.table.history()]
        assert keys == [400, 400 + 280, 400 + 2 * 280, 400 + 3 * 280], (files, history)
        assert png.read_bytes()[:4] == b"\x89PNG"
    finally:
        run.table.close()
