"""The ``dynbucket`` command."""

from __future__ import annotations

import argparse
import signal
import sys
from collections.abc import Sequence
from types import FrameType


def _demo(args: argparse.Namespace) -> int:
    from dynbucket.pipeline.runtime import Runtime
    from dynbucket.pipeline.smoke import run_smoke

    with Runtime() as rt:
        result = run_smoke(rt, rows=args.rows)
    print(
        f"sent {result.rows_sent} rows through {result.slots} assigner slot actor(s); "
        f"{result.rows_back} came back tagged in {result.seconds:.1f}s"
    )
    print(f"{'partition':<12}{'bucket':>8}{'keys':>10}")
    for partition, bucket, keys in result.layout:
        print(f"{partition:<12}{bucket:>8}{keys:>10}")
    return 0 if result.rows_back == result.rows_sent else 1


def _bench_datapath(args: argparse.Namespace) -> int:
    from dynbucket.pipeline.bench import datapath
    from dynbucket.pipeline.runtime import Runtime

    with Runtime() as rt:
        datapath.run(rt, args.sizes, args.runs, args.cases or datapath.CASES)
    return 0


def _bench_read(args: argparse.Namespace) -> int:
    from dynbucket.pipeline.bench import read

    read.run(args.rows, args.runs, args.workdir)
    return 0


def _bench_assigner(args: argparse.Namespace) -> int:
    from dynbucket.pipeline.bench import assigner

    assigner.run(args.keys, args.runs, not args.no_actor, args.workdir)
    return 0


def _sizes(text: str) -> list[int]:
    return [int(float(x)) for x in text.split(",")]


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    # A plain SIGTERM (timeout, kill, CI) would skip every `finally` and leave Ray's and
    # Spark's processes behind; as SystemExit it unwinds through Runtime.stop().
    sys.exit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    parser = argparse.ArgumentParser(prog="dynbucket", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="run the main job on an embedded Ray + Spark on Ray")
    demo.add_argument("--rows", type=int, default=200_000)
    demo.set_defaults(func=_demo)

    bench = sub.add_parser("bench", help="benchmarks (side by side in one run, medians)")
    bench_sub = bench.add_subparsers(dest="bench", required=True)
    dp = bench_sub.add_parser("datapath", help="Spark -> actors -> Spark: the ways rows travel")
    dp.add_argument("--sizes", type=_sizes, default=[1_000_000, 5_000_000])
    dp.add_argument("--runs", type=int, default=3)
    dp.add_argument("--cases", type=lambda t: t.split(","), default=None)
    dp.set_defaults(func=_bench_datapath)
    rd = bench_sub.add_parser("read", help="snapshot read vs plain Parquet; RLI bulk read")
    rd.add_argument("--rows", type=lambda t: int(float(t)), default=5_000_000)
    rd.add_argument("--runs", type=int, default=3)
    rd.add_argument("--workdir", default=None, help="where to build the tables (temporary)")
    rd.set_defaults(func=_bench_read)
    asg = bench_sub.add_parser("assigner", help="the assigner core on one 10M-key partition")
    asg.add_argument("--keys", type=lambda t: int(float(t)), default=10_000_000)
    asg.add_argument("--runs", type=int, default=3)
    asg.add_argument("--no-actor", action="store_true", help="skip the Ray actor case")
    asg.add_argument("--workdir", default=None, help="where to build the index (temporary)")
    asg.set_defaults(func=_bench_assigner)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
