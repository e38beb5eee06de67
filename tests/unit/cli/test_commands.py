"""The ``dynbucket`` command line (``cli/commands.py``): what ``--help`` tells and how the
arguments are read."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from dynbucket.cli import commands as cli


def _subcommands(p: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction))
    return dict(found.choices)


def test_help_names_every_command_and_explains_every_argument(
    capsys: pytest.CaptureFixture[str],
) -> None:
    p = cli.parser()
    commands = _subcommands(p)
    with pytest.raises(SystemExit):
        p.parse_args(["--help"])
    top = capsys.readouterr().out
    assert "``" not in top  # no reStructuredText in what a person reads
    for name in commands:
        assert name in top.split("positional arguments")[0], name
    unexplained = []
    todo = [f"dynbucket {name}" for name in commands]
    parsers = dict(zip(todo, commands.values(), strict=True))
    while todo:  # every command, and every bench of `dynbucket bench`
        name = todo.pop()
        for action in parsers[name]._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub, sp in action.choices.items():
                    todo.append(f"{name} {sub}")
                    parsers[todo[-1]] = sp
            elif not action.help:
                unexplained.append(f"{name}: {action.dest}")
    assert unexplained == []


def test_options_before_the_files_take_one_value_each() -> None:
    args = cli.parser().parse_args(
        ["ingest", "--key", "id,region", "--partition-by", "day", "t", "a.csv", "b.csv"]
    )
    assert (args.key, args.partition_by) == (["id", "region"], ["day"])
    assert (args.table, args.files) == ("t", ["a.csv", "b.csv"])
    again = cli.parser().parse_args(["ingest", "t", "a.csv", "--key", "id", "--key", "region"])
    assert again.key == ["id", "region"]
    unpartitioned = cli.parser().parse_args(["ingest", "t", "a.csv", "--partition-by", ""])
    assert unpartitioned.partition_by == []
    assert cli.parser().parse_args(["ingest", "t", "a.csv"]).partition_by is None


def test_show_keeps_its_columns_with_long_partition_names(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    import pyarrow as pa

    from dynbucket.table import Table

    schema = pa.schema([("id", pa.string()), ("region", pa.string())])
    t = Table.create(str(tmp_path / "t"), schema, "id", "region")
    long = "europe-west-frankfurt-availability-zone-b"
    t.upsert(pa.table({"id": ["a", "b"], "region": [long, "us"]}, schema=schema))
    assert cli._run(cli.parser().parse_args(["show", t.uri]), sys.stderr) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:2] == ["partition", "bucket"])
    rows = lines[header : header + 3]
    assert rows[1].startswith(f"region={long} ") and rows[2].startswith("region=us ")
    # Each column ends where its heading does.
    ends = [rows[0].index("bucket") + len("bucket"), rows[0].index("files") + len("files")]
    for row in rows[1:]:
        assert row[ends[0] - 1] == "0" and len(row) == ends[1], rows
