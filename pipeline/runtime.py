"""The runtime: an embedded (or joined) Ray plus a RayDP Spark session on it.

Spark on Ray via RayDP, on OpenJDK 17, works only with a set of JVM options a newcomer would
not guess (docs/design.md, "Facts about the stack"). :class:`Runtime` carries them, so that
``with Runtime() as rt: rt.spark`` is all a user needs.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import subprocess
import sys
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType, TracebackType
from typing import TYPE_CHECKING, Any

from dynbucket.base.errors import ConfigError, RuntimeSetupError
from dynbucket.java import find_java, jdk_java_options

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

log = logging.getLogger(__name__)

_JVM_OPTION_KEYS = (
    "spark.ray.raydp_app_master.extraJavaOptions",
    "spark.executor.extraJavaOptions",
    "spark.driver.extraJavaOptions",
)
_MEMORY = re.compile(r"^[1-9][0-9]*[kmgt]?$", re.IGNORECASE)
# RayDP keeps one global Spark context per process; two Runtimes would fight over it.
_active_lock = threading.Lock()
_active: Runtime | None = None


@dataclass(frozen=True)
class RuntimeConfig:
    """How to start (or join) Ray and the Spark session on it.

    Defaults fit one 2-core / 24 GiB machine; on a cluster, raise ``executors`` and memory.
    """

    address: str | None = None
    """Ray cluster to join ("auto", "host:port", "ray://..."); None: ``RAY_ADDRESS``, else
    start an embedded local Ray."""
    app_name: str = "dynbucket"
    """Spark application name (also names RayDP's master actor)."""
    namespace: str = "dynbucket"
    """Ray namespace for dynbucket's named actors."""
    num_cpus: int | None = None
    """Logical CPUs of an embedded Ray; None: twice the machine's cores. Spark's executors
    reserve the machine's cores; Ray tasks (Ray Data, RayDP's ``from_spark``) need logical
    CPUs beyond those or they wait forever. Ignored when joining."""
    executors: int = 1
    """Spark executors (each one Ray actor)."""
    executor_cores: int | None = None
    """Cores per executor; None: the machine's cores (embedded), 2 when joining a cluster."""
    executor_memory: str = "4g"
    """JVM heap per executor."""
    executor_placement: str | None = None
    """How executors are placed over a cluster's nodes: a Ray placement group strategy
    (``"SPREAD"``: one per node as far as they go; ``"PACK"``, ...); None: Ray's default."""
    driver_memory: str = "2g"
    """JVM heap of the Spark driver (runs in this process's child JVM)."""
    object_store_memory: int | None = None
    """Bytes of Ray object store of an embedded Ray; None: Ray's default."""
    shuffle_partitions: int | None = None
    """``spark.sql.shuffle.partitions``; None: 2 x total executor cores."""
    loopback: bool = True
    """An embedded Ray and the Spark on it listen on 127.0.0.1 only (no other machine can
    reach them). False: on this machine's network address, as a cluster's head would."""
    log_level: str = "WARN"
    """Spark's log level once started."""
    verbose: bool = False
    """Show Ray's, Spark's and the JVM's output on this process's terminal. Off: it goes to
    a log file (``Runtime.log_path``), as the ``dynbucket`` command's does; the script's
    own ``print``, warnings and tracebacks stay on the terminal."""
    spark_conf: Mapping[str, str] = field(default_factory=dict)
    """Extra Spark settings; they win over dynbucket's."""
    driver_write_max_bytes: int = 8 << 20
    """A Spark DataFrame that Spark estimates at most this size (its input files' bytes, for
    a file scan) is written by this process, not Spark's Python workers: the same actors
    tag it, the same files result, without a Spark job's second of overhead. 0: always by
    Spark tasks."""
    spark_one_stage_max_bytes: int = 64 << 20
    """A larger Spark DataFrame of a partitioned table that Spark estimates at most this size
    is shuffled by partition and tagged and written by one stage of Python workers (its
    rows cross into Python once, not twice); larger ones are tagged where they are and
    shuffled by file group, so that one partition's buckets are written in parallel. 0:
    always two stages."""
    driver_read_max_bytes: int = 8 << 20
    """``Table.read()`` of a snapshot whose files total at most this is read by this process
    and handed to Spark as Arrow (the same rows, without a job of Python tasks). 0: always
    by Spark tasks."""

    def __post_init__(self) -> None:
        for name in ("num_cpus", "executors", "executor_cores", "shuffle_partitions"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"RuntimeConfig.{name}={value!r}: must be an integer >= 1")
        for name in ("executor_memory", "driver_memory"):
            value = getattr(self, name)
            if not isinstance(value, str) or not _MEMORY.match(value):
                raise ConfigError(
                    f"RuntimeConfig.{name}={value!r}: must be a JVM memory size such as "
                    "'512m' or '4g'"
                )
        placements = ("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD")
        if self.executor_placement is not None and self.executor_placement not in placements:
            raise ConfigError(
                f"RuntimeConfig.executor_placement={self.executor_placement!r}: must be None "
                f"or one of {', '.join(placements)} (Ray placement group strategies)"
            )
        for name, zero in (
            ("driver_write_max_bytes", "writes every Spark DataFrame with Spark tasks"),
            ("driver_read_max_bytes", "reads every table with Spark tasks"),
            ("spark_one_stage_max_bytes", "writes in two stages"),
        ):
            limit = getattr(self, name)
            if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
                raise ConfigError(
                    f"RuntimeConfig.{name}={limit!r}: must be an integer >= 0 (bytes; 0 {zero})"
                )
        if self.object_store_memory is not None and self.object_store_memory < 78_643_200:
            raise ConfigError(
                f"RuntimeConfig.object_store_memory={self.object_store_memory!r}: Ray needs "
                "at least 78643200 bytes (75 MiB)"
            )
        object.__setattr__(self, "spark_conf", MappingProxyType(dict(self.spark_conf)))


class Runtime:
    """Starts an embedded Ray and a RayDP Spark session on it, or joins a Ray cluster.

    Use it as a context manager; it shuts down what it started, also on error::

        with Runtime() as rt:
            rt.spark.range(10).show()

    Only one Runtime can be active in a process (RayDP keeps one global Spark context).
    """

    def __init__(self, config: RuntimeConfig | None = None, **overrides: Any) -> None:
        base = config or RuntimeConfig()
        self.config = RuntimeConfig(**{**base.__dict__, **overrides}) if overrides else base
        self._spark: SparkSession | None = None
        self._started_ray = False
        self._loopback: _Loopback | None = None
        self._ray_address: str | None = None
        self._quiet: contextlib.ExitStack | None = None
        self._spark_start: threading.Thread | None = None
        self._spark_error: BaseException | None = None
        self.log_path: Path | None = None
        """Where Ray's, Spark's and the JVM's output goes (None: the terminal, with
        ``verbose``; or not started)."""

    # --- lifecycle -----------------------------------------------------------------------

    def __enter__(self) -> Runtime:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> Runtime:
        """Starts (or joins) Ray, then Spark on it. Idempotent for a started Runtime."""
        global _active
        with _active_lock:
            if _active is self:
                return self
            if _active is not None:
                raise RuntimeSetupError(
                    "a dynbucket Runtime is already active in this process; use it, or stop "
                    "it (Runtime.stop()) before starting another"
                )
            _active = self
        try:
            if not self.config.verbose:
                self._be_quiet()
            find_java()
            # Spark's Python workers must run this interpreter, or they cannot import pyspark.
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            # Quiet: the loggers Ray sets up as it loads and starts write to descriptor 2
            # (the log), not to the terminal the script's own stderr stays on.
            quiet = sys.__stderr__ if not self.config.verbose else None
            with contextlib.redirect_stderr(quiet or sys.stderr):
                self._start_ray()
            # Spark starts beside the script (its JVM takes most of a start's seconds): what
            # needs no Spark (in-process writes, reads, the slot actors) does not wait.
            self._spark_start = threading.Thread(
                target=self._start_spark_beside, name="dynbucket-spark-start", daemon=True
            )
            self._spark_start.start()
        except BaseException:
            self.stop()
            raise
        return self

    def _start_spark_beside(self) -> None:
        try:
            self._start_spark()
        except BaseException as e:  # raised to whoever asks for Spark (``spark``)
            self._spark_error = e

    def _wait_for_spark(self) -> None:
        started = self._spark_start
        if started is not None:
            started.join()
        if self._spark_error is not None:
            error, self._spark_error = self._spark_error, None
            self._spark_start = None
            raise error

    def stop(self) -> None:
        """Stops Spark, then the Ray it started (a joined cluster keeps running)."""
        global _active
        import ray

        try:
            if self._spark_start is not None:  # a start under way ends first
                self._spark_start.join()
                self._spark_start = None
            if self._spark is not None:
                import raydp

                self._spark = None
                try:
                    raydp.stop_spark()
                finally:
                    _stop_driver_jvm()
        finally:
            try:
                if self._started_ray or ray.is_initialized():
                    ray.shutdown()
            finally:
                self._started_ray = False
                if self._loopback is not None:
                    self._loopback.leave()
                    self._loopback = None
                with _active_lock:
                    if _active is self:
                        _active = None
                if self._quiet is not None:
                    self._quiet.close()
                    self._quiet = None

    # --- what a started runtime offers ---------------------------------------------------

    @property
    def spark(self) -> SparkSession:
        """The Spark session (RayDP's, on this Ray); the first use waits for its start,
        which runs beside the script from ``start()`` on.

        Raises:
            RuntimeSetupError: the Runtime is not started, or Spark could not start.
        """
        self._wait_for_spark()
        if self._spark is None:
            raise RuntimeSetupError("the Runtime is not started; use `with Runtime() as rt:`")
        return self._spark

    @property
    def ray_address(self) -> str:
        """GCS address of the Ray cluster, for processes (Spark's Python workers) to join."""
        if self._ray_address is None:
            raise RuntimeSetupError("the Runtime is not started; use `with Runtime() as rt:`")
        return self._ray_address

    @property
    def started_embedded(self) -> bool:
        """Whether this Runtime started its own local Ray (rather than joining one)."""
        return self._started_ray

    @property
    def default_parallelism(self) -> int:
        """Spark's default parallelism: total executor cores (while Spark starts, what its
        configuration gives, so that slot actors start without waiting for it)."""
        if self._spark is None and self._spark_start is not None:
            given = self.config.spark_conf.get("spark.default.parallelism")
            return int(given) if given else spark_parallelism(self.config)
        return int(self.spark.sparkContext.defaultParallelism)

    # --- internals -----------------------------------------------------------------------

    def _be_quiet(self) -> None:
        """Ray's, Spark's and the JVM's output (descriptors 1 and 2, which the processes
        they start inherit) to a log file until :meth:`stop`; named once, in dynbucket's
        log (``logging``, INFO) and :attr:`log_path`."""
        from dynbucket.console import active_log, log_path, quiet

        self.log_path = active_log()
        if self.log_path is not None:  # already quiet (the dynbucket command): its log
            return
        self.log_path = log_path("runtime")
        self._quiet = contextlib.ExitStack()
        self._quiet.enter_context(quiet(self.log_path, python_stderr=True))
        log.info("Ray, Spark and JVM output: %s (Runtime(verbose=True) shows it)", self.log_path)

    def _start_ray(self) -> None:
        import ray

        cfg = self.config
        address = cfg.address or os.environ.get("RAY_ADDRESS") or None
        if ray.is_initialized():
            raise RuntimeSetupError(
                "Ray is already initialised in this process; dynbucket starts (or joins) Ray "
                "itself: call ray.shutdown() first, or pass the cluster address to Runtime"
            )
        kwargs: dict[str, Any] = {
            "namespace": cfg.namespace,
            "logging_level": logging.WARNING,
            "configure_logging": True,
            # Workers' output stays in Ray's session logs (quiet), or is printed here.
            "log_to_driver": cfg.verbose,
        }
        if address is None:
            if cfg.loopback:
                self._loopback = _Loopback.enter()
            kwargs.update(
                address="local",
                num_cpus=cfg.num_cpus or 2 * _machine_cores(),
                include_dashboard=False,
                # Ray starts a worker process per CPU for a first driver by default; on a
                # small machine they take a second of Ray's start, and the script's
                # in-process writes never use them (the slot actors start their own).
                _system_config={"prestart_worker_first_driver": False},
            )
            if cfg.object_store_memory is not None:
                kwargs["object_store_memory"] = cfg.object_store_memory
        else:
            kwargs["address"] = address
        try:
            ray.init(**kwargs)
        except Exception as e:
            where = "an embedded local Ray" if address is None else f"Ray at {address!r}"
            hint = ""
            if "InvalidAuthToken" in str(e) or "InvalidAuthToken" in str(e.__cause__):
                hint = (
                    "; the cluster uses token authentication: set RAY_AUTH_MODE=token and give "
                    "the cluster's token (RAY_AUTH_TOKEN, RAY_AUTH_TOKEN_PATH or "
                    "~/.ray/auth_token)"
                )
            raise RuntimeSetupError(f"could not start {where}: {e}{hint}") from e
        self._started_ray = address is None
        self._ray_address = ray.get_runtime_context().gcs_address

    def _start_spark(self) -> None:
        import ray
        import raydp

        cfg = self.config
        if self._started_ray:
            ray_cpus = int(ray.cluster_resources().get("CPU", 1))
            cores = cfg.executor_cores or max(1, min(_machine_cores(), ray_cpus) // cfg.executors)
        else:
            cores = cfg.executor_cores or 2
        java_opts = jdk_java_options()
        conf: dict[str, str] = {key: java_opts for key in _JVM_OPTION_KEYS}
        conf.update(
            {
                "spark.driver.memory": cfg.driver_memory,
                "spark.sql.shuffle.partitions": str(
                    cfg.shuffle_partitions or 2 * cores * cfg.executors
                ),
                "spark.sql.execution.arrow.pyspark.enabled": "true",
                "spark.sql.session.timeZone": "UTC",
                "spark.ui.enabled": "false",
                "spark.ui.showConsoleProgress": "false",
                "spark.executorEnv.PYSPARK_PYTHON": os.environ["PYSPARK_PYTHON"],
            }
        )
        if not any(k.startswith(_MASTER_RESOURCE) for k in cfg.spark_conf):
            conf.update(_master_on_head())
        conf.update(cfg.spark_conf)
        try:
            spark = raydp.init_spark(
                app_name=cfg.app_name,
                num_executors=cfg.executors,
                executor_cores=cores,
                executor_memory=cfg.executor_memory,
                placement_group_strategy=cfg.executor_placement,
                # Connects the driver JVM to Ray, which RayDP's from_spark needs; RayDP does
                # not support it over Ray client (ray://).
                fault_tolerant_mode=not (cfg.address or "").startswith("ray://"),
                configs=conf,
            )
        except Exception as e:
            raise RuntimeSetupError(f"could not start Spark on Ray (RayDP): {e}") from e
        spark.sparkContext.setLogLevel(cfg.log_level)
        self._spark = spark


@dataclass
class _Loopback:
    """Ray on one machine with every server on 127.0.0.1.

    On Linux Ray takes the machine's network address as a node's address, even when told
    127.0.0.1, and its servers (GCS, raylet, workers; RayDP's Spark driver, master and
    executors, which use the node address) listen on it or on all interfaces. Its
    single-machine mode, the one it uses on macOS and Windows, takes 127.0.0.1 instead:
    chosen by an environment variable that Ray's own processes inherit, and read by this
    process's Ray through a constant set at import. Both are restored on ``leave``.
    """

    previous_env: str | None
    previous_flag: bool

    VARIABLE = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"

    @classmethod
    def enter(cls) -> _Loopback:
        from ray._private import ray_constants

        entered = cls(os.environ.get(cls.VARIABLE), ray_constants.ENABLE_RAY_CLUSTER)
        os.environ[cls.VARIABLE] = "0"
        ray_constants.ENABLE_RAY_CLUSTER = False
        return entered

    def leave(self) -> None:
        from ray._private import ray_constants

        if self.previous_env is None:
            os.environ.pop(self.VARIABLE, None)
        else:
            os.environ[self.VARIABLE] = self.previous_env
        ray_constants.ENABLE_RAY_CLUSTER = self.previous_flag


_MASTER_RESOURCE = "spark.ray.raydp_spark_master.actor.resource."


def _master_on_head() -> dict[str, str]:
    """RayDP's master actors on Ray's head node, taking no CPU.

    RayDP creates its app master with no resources, so Ray may put it on any node, and the
    executor actors are the app master's: when its node goes, every executor goes with it
    and Spark waits for executors with no end (seen: a job waited 14 minutes after one of
    three nodes was removed). On the head, which the driver and the cluster itself depend on
    anyway, a worker node's loss takes only that node's executors, whose tasks Spark runs
    again elsewhere. RayDP gives these resources to both of its master actors."""
    return {f"{_MASTER_RESOURCE}CPU": "0", f"{_MASTER_RESOURCE}node:__internal_head__": "0.001"}


def spark_parallelism(config: RuntimeConfig | None = None) -> int:
    """Spark's default parallelism that a ``Runtime(config)`` would have (the assigner
    slots its writes use by default), known without starting it: executors times their
    cores (an embedded Ray's share of the machine's cores; 2 each on a cluster joined)."""
    cfg = config or RuntimeConfig()
    if cfg.address or os.environ.get("RAY_ADDRESS"):
        return cfg.executors * (cfg.executor_cores or 2)
    ray_cpus = cfg.num_cpus or 2 * _machine_cores()
    return cfg.executors * (
        cfg.executor_cores or max(1, min(_machine_cores(), ray_cpus) // cfg.executors)
    )


def _machine_cores() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 2


def _stop_driver_jvm(timeout: float = 60.0) -> None:
    """Ends the Spark driver JVM and reaps it.

    pyspark leaves its gateway JVM running after the session stops; it exits only when its
    stdin (a pipe from this process) closes, which otherwise happens at interpreter exit and
    leaves a zombie behind. Closing it here lets a stopped Runtime leave no process.
    """
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    proc = getattr(gateway, "proc", None)
    SparkContext._gateway = None
    SparkContext._jvm = None
    try:
        gateway.shutdown()
    except Exception as e:  # the JVM may already be gone; still reap it below
        log.debug("Spark gateway shutdown: %s", e)
    if proc is None:
        return
    try:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def active_runtime() -> Runtime | None:
    """The Runtime started in this process, if any."""
    return _active
