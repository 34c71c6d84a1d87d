"""The two worker pools' process settings, and the Dramatiq command line each runs.

``outbox worker high|bulk`` reads these and becomes ``dramatiq outbox.worker``
for its queue; ``outbox worker all`` runs the relay and both pools as children.
Pure: the settings come from a mapping (the environment at the command's edge),
the host's CPUs from :func:`usable_cpus`, the one function here that reads a file.

A login-code pool is one process; a bulk pool has a process per CPU the host
gives it (its CPU quota, where a container has one), since a process's sends
are bound by its one interpreter: on two cores, two bulk processes drain a
newsletter about a sixth faster at about the same CPU per email (BENCHMARKS.md).

Login codes get a short idle poll (5 ms) so they never wait on the broker
consumer's backoff; bulk workers poll lazily and yield the CPU to the relay and
to the login-code pool (niceness 10). Each pool's Dramatiq metrics have a port
of their own and a directory of their own, because one exposition server sums
the files of its directory: two pools must never share either.
"""

from __future__ import annotations

import math
import os
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from outbox.errors import ConfigError

POOLS = ("high", "bulk")

# name: (default, lowest, highest); every one is a whole number.
_LIMITS: dict[str, tuple[int, int, int]] = {
    "OUTBOX_WORKER_PROCESSES": (1, 1, 64),  # both pools, where a pool's own is not set
    "OUTBOX_HIGH_PROCESSES": (1, 1, 64),
    "OUTBOX_BULK_PROCESSES": (0, 1, 64),  # default: the CPUs (usable_cpus), shown as 0
    "OUTBOX_WORKER_THREADS": (8, 1, 256),
    "OUTBOX_WORKER_SHUTDOWN_SECONDS": (25, 1, 3600),
    "OUTBOX_HIGH_THREADS": (2, 1, 256),
    "OUTBOX_BULK_THREADS": (2, 1, 256),
    "OUTBOX_HIGH_IDLE_POLL_MS": (5, 1, 60_000),
    "OUTBOX_BULK_IDLE_POLL_MS": (200, 1, 60_000),
    "OUTBOX_HIGH_NICENESS": (0, 0, 19),
    "OUTBOX_BULK_NICENESS": (10, 0, 19),
    "OUTBOX_HIGH_METRICS_PORT": (9191, 0, 65535),
    "OUTBOX_BULK_METRICS_PORT": (9192, 0, 65535),
}


@dataclass(frozen=True)
class Pool:
    """One pool's settings: what ``outbox worker high`` (or ``bulk``) runs with."""

    name: str  # high | bulk
    processes: int
    threads: int
    idle_poll_ms: int  # Dramatiq's dramatiq_worker_timeout: the idle consumer's longest poll
    niceness: int
    metrics_port: int  # the pool's Dramatiq metrics; 0: none
    metrics_host: str
    metrics_dir: Path
    shutdown_seconds: int

    @property
    def queue(self) -> str:
        return f"email_{self.name}"

    def dramatiq_args(self) -> list[str]:
        """Dramatiq's arguments after ``dramatiq``: the package, the queue, the sizes."""
        return [
            "outbox.worker",
            "-Q",
            self.queue,
            "-p",
            str(self.processes),
            "-t",
            str(self.threads),
            "--worker-shutdown-timeout",
            str(self.shutdown_seconds * 1000),
        ]

    def dramatiq_env(self) -> dict[str, str]:
        """The environment Dramatiq reads these settings from (its own lower-case names)."""
        env = {"dramatiq_worker_timeout": str(self.idle_poll_ms)}
        if self.metrics_port:
            env |= {
                "dramatiq_prom_port": str(self.metrics_port),
                "dramatiq_prom_host": self.metrics_host,
                "dramatiq_prom_db": str(self.metrics_dir),
            }
        return env


def pool_settings(
    name: str,
    environ: Mapping[str, str],
    *,
    namespace: str,
    metrics_host: str,
    cpus: int = 1,
    processes: int | None = None,
    threads: int | None = None,
) -> Pool:
    """Pool ``name``'s settings; ``processes`` and ``threads`` (the -p and -t flags) win
    over the environment; ``cpus``: the host's (:func:`usable_cpus`), the bulk pool's
    default processes. A ConfigError names the first setting that cannot work."""
    if name not in POOLS:
        raise ConfigError(f"unknown worker pool {name!r} (high, bulk or all)")
    prefix = f"OUTBOX_{name.upper()}_"
    return Pool(
        name=name,
        processes=_flag("-p/--processes", processes) or pool_processes(name, environ, cpus),
        threads=_flag("-t/--threads", threads) or whole_number(environ, "OUTBOX_WORKER_THREADS"),
        idle_poll_ms=whole_number(environ, prefix + "IDLE_POLL_MS"),
        niceness=whole_number(environ, prefix + "NICENESS"),
        metrics_port=whole_number(environ, prefix + "METRICS_PORT"),
        metrics_host=metrics_host,
        metrics_dir=metrics_dir(environ, namespace) / name,
        shutdown_seconds=whole_number(environ, "OUTBOX_WORKER_SHUTDOWN_SECONDS"),
    )


def pool_processes(name: str, environ: Mapping[str, str], cpus: int) -> int:
    """The pool's own setting, else OUTBOX_WORKER_PROCESSES, else its default: one
    for login codes, ``cpus`` (at most 64) for bulk mail."""
    for setting in (f"OUTBOX_{name.upper()}_PROCESSES", "OUTBOX_WORKER_PROCESSES"):
        if environ.get(setting, "").strip():
            return whole_number(environ, setting)
    return min(max(cpus, 1), 64) if name == "bulk" else 1


def cpus_allowed(affinity: int, cpu_max: str | None) -> int:
    """CPUs a process may use: those it may run on, within its cgroup's quota
    (``cpu.max``: "QUOTA PERIOD" or "max PERIOD"), a part of one counting whole."""
    if cpu_max:
        quota, _, period = cpu_max.strip().partition(" ")
        if quota != "max" and quota.isdigit() and period.isdigit() and int(period) > 0:
            return max(1, min(affinity, math.ceil(int(quota) / int(period))))
    return max(1, affinity)


def usable_cpus(cpu_max_file: str = "/sys/fs/cgroup/cpu.max") -> int:
    """This host's CPUs for this process (the edge of :func:`cpus_allowed`)."""
    try:
        with open(cpu_max_file, encoding="ascii") as f:
            cpu_max: str | None = f.read()
    except OSError:
        cpu_max = None  # no cgroup v2 quota to honour
    return cpus_allowed(len(os.sched_getaffinity(0)), cpu_max)


def small_profile_threads(environ: Mapping[str, str], threads: int | None = None) -> dict[str, int]:
    """Threads of each pool in ``outbox worker all``: -t for both, else each its own."""
    if _flag("-t/--threads", threads):
        return dict.fromkeys(POOLS, threads or 0)
    return {pool: whole_number(environ, f"OUTBOX_{pool.upper()}_THREADS") for pool in POOLS}


def metrics_dir(environ: Mapping[str, str], namespace: str) -> Path:
    """Where the pools' metric files go: per OUTBOX_NAMESPACE unless set, so that two
    deployments on one host never sum each other's figures."""
    chosen = environ.get("OUTBOX_WORKER_METRICS_DIR", "")
    if chosen:
        return Path(chosen)
    return Path(tempfile.gettempdir()) / f"outbox-metrics-{namespace}"


def whole_number(environ: Mapping[str, str], name: str) -> int:
    default, lowest, highest = _LIMITS[name]
    raw = environ.get(name, "").strip()
    if not raw:
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name} must be a whole number from {lowest} to {highest}") from None
    if not lowest <= value <= highest:
        raise ConfigError(f"{name} must be a whole number from {lowest} to {highest}")
    return value


def _flag(name: str, value: int | None) -> int | None:
    if value is not None and value < 1:
        raise ConfigError(f"{name} must be 1 or more")
    return value


def check_all(environ: Mapping[str, str]) -> None:
    """Every pool setting, read once: a ConfigError on the first that cannot work."""
    for name in _LIMITS:
        whole_number(environ, name)
    ports = [whole_number(environ, f"OUTBOX_{p.upper()}_METRICS_PORT") for p in POOLS]
    if ports[0] and ports[0] == ports[1]:
        raise ConfigError(
            "OUTBOX_HIGH_METRICS_PORT and OUTBOX_BULK_METRICS_PORT must differ: "
            "each pool's metrics server sums only its own pool's figures"
        )


def shown(environ: Mapping[str, str], cpus: int) -> list[tuple[str, str, bool]]:
    """Each pool setting for ``outbox config``: (name, value, whether it is the default).
    A value that cannot work is shown as given; ``outbox config check`` names it."""
    rows = []
    for name, (default, _, _) in _LIMITS.items():
        if name == "OUTBOX_BULK_PROCESSES" and not environ.get(name, "").strip():
            rows.append((name, f"{pool_processes('bulk', {}, cpus)} (the CPUs)", True))
            continue
        try:
            value = str(whole_number(environ, name))
        except ConfigError:
            value = environ[name]
        rows.append((name, value, value == str(default)))
    return rows
