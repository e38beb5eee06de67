"""Counts the module boundaries one Spark upsert crosses (a figure of the layout issue).

Runs an embedded runtime, creates a small table, warms it up with one upsert, then traces a
second Spark upsert: on the driver with ``sys.setprofile``, and in Spark's Python workers by
wrapping every ``mapInArrow`` function in the same tracer (the threads they start too). A
boundary is a distinct pair (caller module, callee module) of dynbucket modules with caller
!= callee; the modules touched are counted too. ``driver write->format`` counts the distinct
call sites (file, line) on the driver where a module of the write layer calls into one of
the format layer: how often the driver goes back and forth between the two rooms. The
layers are told by name (``.write.`` and ``.format.``), so the count reads the same before
and after the rooms moved.
Three scenarios (``--scenario``): ``spark`` (the default: a Spark upsert), ``local`` (an
in-process upsert of a pyarrow Table) and ``service`` (an in-process upsert after which
every automatic service is due and runs inline: compaction, clean, index compaction and
archival; the services are traced with the write).
Usage: ``.venv/bin/python scripts/module-boundaries.py [--scenario S] [--sites]``
(``--sites`` lists the driver's write->format call sites).
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
import threading

import pyarrow as pa

OUT = tempfile.mkdtemp(prefix="boundaries-")


def tracer(edges: set[tuple[str, str]], sites: set[tuple[str, int]] | None = None):  # type: ignore[no-untyped-def]
    def profile(frame, event, arg):  # type: ignore[no-untyped-def]
        if event != "call":
            return
        callee = frame.f_globals.get("__name__", "")
        back = frame.f_back
        caller = back.f_globals.get("__name__", "") if back is not None else ""
        if callee.startswith("dynbucket.") and caller.startswith("dynbucket."):
            edges.add((caller, callee))
            if sites is not None and ".write." in caller and ".format." in callee:
                sites.add((back.f_code.co_filename, back.f_lineno))

    return profile


#: Folders that are layers; any other module of the package is the public API's layer.
LAYERS = ("actors", "base", "format", "write", "bench", "cli")


def layer(module: str) -> str:
    """The layer of a dynbucket module: its folder under the package (``api`` for the
    modules at the top: the public API, runtime, CLI modules of old trees)."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] == "pipeline":  # a tree from before the rename
        parts = parts[1:]
    return parts[1] if len(parts) > 2 and parts[1] in LAYERS else "api"


def traced(fn, out_dir):  # type: ignore[no-untyped-def]
    def run(batches):  # type: ignore[no-untyped-def]
        import json as _json
        import os as _os
        import sys as _sys
        import threading as _threading

        edges: set[tuple[str, str]] = set()
        _sys.setprofile(tracer(edges))
        _threading.setprofile(tracer(edges))  # the task's thread pools too
        try:
            yield from fn(batches)
        finally:
            _sys.setprofile(None)
            _threading.setprofile(None)  # type: ignore[arg-type]
            with open(_os.path.join(out_dir, f"worker-{_os.getpid()}-{id(edges)}.json"), "w") as f:
                _json.dump(sorted(edges), f)

    return run


def main() -> None:
    from pyspark.sql import DataFrame

    try:
        from dynbucket import DynamicBucketIndex, Runtime, Table
    except ImportError:  # a tree from before the package was `dynbucket` (to compare)
        from dynbucket.pipeline import DynamicBucketIndex, Runtime, Table

    original = DataFrame.mapInArrow
    DataFrame.mapInArrow = lambda self, fn, schema, *a, **k: original(  # type: ignore[method-assign]
        self, traced(fn, OUT), schema, *a, **k
    )
    schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("v", pa.int64())])
    rows = [(f"k{i}", f"d{i % 4}", i) for i in range(2000)]
    scenario = sys.argv[sys.argv.index("--scenario") + 1] if "--scenario" in sys.argv else "spark"
    edges: set[tuple[str, str]] = set()
    sites: set[tuple[str, int]] = set()

    def traced_call(call):  # type: ignore[no-untyped-def]
        sys.setprofile(tracer(edges, sites))
        threading.setprofile(tracer(edges))
        try:
            call()
        finally:
            sys.setprofile(None)
            threading.setprofile(None)  # type: ignore[arg-type]

    def create(**kwargs):  # type: ignore[no-untyped-def]
        index = DynamicBucketIndex(max_keys_per_bucket=100)
        return Table.create(os.path.join(OUT, "t"), schema, "id", "day", index=index, **kwargs)

    if scenario == "spark":
        with Runtime() as rt:
            t = create(runtime=rt)
            df = rt.spark.createDataFrame(rows, "id string, day string, v long")
            t.upsert(df)
            for f in glob.glob(os.path.join(OUT, "worker-*.json")):
                os.remove(f)
            traced_call(lambda: t.upsert(df))
            t.close()
    else:
        data = pa.Table.from_pylist(
            [{"id": k, "day": d, "v": v} for k, d, v in rows], schema=schema
        )
        options = None
        if scenario == "service":  # every service due after the second write, inline
            options = {
                "hoodie.compact.inline": True,
                "hoodie.compact.inline.max.delta.commits": 1,
                "hoodie.log.compaction.enable": False,
                "hoodie.clean.max.commits": 1,
                "cleaner.commits-retained": 1,
                "index.compaction.min-files": 2,
                "hoodie.keep.min.commits": 2,
                "hoodie.keep.max.commits": 3,
            }
        t = create(options=options)

        def batch(n: int) -> pa.Table:  # half the keys of the last write, half new
            return data.set_column(
                0, "id", pa.array([f"k{i + 1000 * n}" for i in range(len(rows))])
            )

        t.upsert(batch(0))
        t.upsert(batch(1))
        traced_call(lambda: print("services:", t.upsert(batch(2)).services, file=sys.stderr))
        t.close()
    for f in glob.glob(os.path.join(OUT, "worker-*.json")):
        with open(f) as fh:
            edges |= {tuple(e) for e in json.load(fh)}  # type: ignore[misc]
    crossing = {(a, b) for a, b in edges if a != b}
    modules = {m for e in edges for m in e}
    layers = {(a, b) for a, b in crossing if layer(a) != layer(b)}
    print(
        json.dumps(
            {
                "boundaries": len(crossing),
                "modules": len(modules),
                "layer crossings": len(layers),
                "driver write->format": len(sites),
            }
        )
    )
    for a, b in sorted(crossing):
        print(f"  {a} -> {b}")
    if "--sites" in sys.argv:
        for file, line in sorted(sites):
            print(f"  site {os.path.relpath(file)}:{line}")


if __name__ == "__main__":
    main()
