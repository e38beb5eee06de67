"""The runtime really starts Ray and Spark on it, and Spark's Python workers work."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from dynbucket.base.errors import RuntimeSetupError
from dynbucket.runtime import Runtime


def test_spark_runs_on_ray_with_python_workers(runtime: Runtime) -> None:
    import ray

    spark = runtime.spark
    assert ray.is_initialized() and runtime.started_embedded
    assert spark.conf.get("spark.master").startswith("ray://")
    # A Python UDF forces Spark's Python workers to start and import pyspark + dynbucket.
    df = spark.range(1000).mapInArrow(_double_ids, "id long")
    assert sorted(r.id for r in df.collect()) == [2 * i for i in range(1000)]
    assert os.environ["PYSPARK_PYTHON"] == sys.executable


def _double_ids(batches):
    import pyarrow.compute as pc

    import dynbucket.actors  # noqa: F401  (the package imports in Spark's workers)

    for b in batches:
        yield b.set_column(0, "id", pc.multiply(b.column(0), 2))


def test_second_runtime_in_one_process_is_refused(runtime: Runtime) -> None:
    with pytest.raises(RuntimeSetupError, match="already active"):
        Runtime().start()
    assert runtime.spark is not None  # the first one is untouched


def test_an_embedded_runtime_listens_on_loopback_only(runtime: Runtime) -> None:
    """Ray's servers, RayDP's Spark master, driver and executors, Spark's Python workers:
    every socket the runtime's processes listen on takes connections from this machine
    only."""
    import psutil

    # A job first, so that executors, Python workers and the slot link are all up.
    assert runtime.spark.range(100).mapInArrow(_double_ids, "id long").count() == 100
    me = psutil.Process()
    listening: dict[str, list[str]] = {}
    for p in [me, *me.children(recursive=True)]:
        try:
            sockets = p.net_connections(kind="inet")
            name = p.name()
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
        for c in sockets:
            if c.status == psutil.CONN_LISTEN:
                listening.setdefault(c.laddr.ip, []).append(f"{name}:{c.laddr.port}")
    names = {n.split(":")[0] for found in listening.values() for n in found}
    assert {"gcs_server", "raylet", "java"} <= names  # the servers were seen
    loopback = {"127.0.0.1", "::1", "::ffff:127.0.0.1"}
    assert {ip: found for ip, found in listening.items() if ip not in loopback} == {}


#: A user's driver script: the default Runtime, a Spark upsert, a stream, a bad row refused
#: on the Spark path. Only its own prints may reach stdout and stderr.
_SCRIPT = """
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from dynbucket import NullKeyError, Runtime, Table

root = Path(sys.argv[1])
schema = pa.schema([("id", pa.string()), ("day", pa.string()), ("ts", pa.int64())])
(root / "incoming").mkdir()
rows = pa.table({"id": ["s1", "s2"], "day": ["d1", "d1"], "ts": [1, 1]}, schema=schema)
pq.write_table(rows, root / "incoming" / "0.parquet")
ddl = "id string, day string, ts long"
with Runtime() as rt:
    t = Table.create(str(root / "t"), schema, "id", "day", "ts", runtime=rt)
    df = rt.spark.createDataFrame([("a", "d1", 1), ("b", "d2", 1)], ddl)
    print("inserted", t.upsert(df).keys_inserted)
    stream = rt.spark.readStream.schema(ddl).parquet(str(root / "incoming"))
    t.stream(stream, str(root / "chk"), trigger={"availableNow": True}).awaitTermination()
    try:
        t.upsert(rt.spark.createDataFrame([("c", "d1", 1), (None, "d1", 2)], ddl))
    except NullKeyError as e:
        print("refused", type(e).__name__, file=sys.stderr)
    print("rows", t.to_arrow().num_rows, rt.log_path.exists())
    t.close()
"""


@pytest.mark.sample(2, family="a whole job as its user runs it")
def test_a_driver_script_prints_only_its_own_output(tmp_path: Path) -> None:
    """Ray's, Spark's and the JVM's output goes to the runtime's log file by default (the
    Python API as quiet as the CLI); the script's own stdout and stderr stay its own."""
    script = tmp_path / "script.py"
    script.write_text(_SCRIPT)
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (done.stdout, done.stderr) == ("inserted 2\nrows 4 True\n", "refused NullKeyError\n")
    (log,) = (tmp_path / "cache" / "dynbucket" / "logs").iterdir()
    assert log.name.startswith("runtime-") and log.stat().st_size > 0  # what was not shown
