"""``outbox worker high|bulk|all``: the send workers, as the Procfiles run them.

``high`` and ``bulk`` check their pool's settings, take the pool's niceness and
become ``dramatiq outbox.worker -Q email_POOL`` (the same process: a platform's
SIGTERM reaches Dramatiq's master directly). ``all`` is the small profile: the
relay and both pools as children of this process. When one of them exits the
others are stopped and this process exits with its status, so the platform
restarts the whole rather than running it half; SIGTERM is passed on to all
three, which hand back what they have not sent within the shutdown timeout.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Iterable, Mapping

from outbox.cli import worker_pools
from outbox.cli.output import Done, Printer, Result
from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.telemetry import liveness
from outbox.telemetry.listen_ports import ensure_free


def worker(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    try:
        worker_pools.check_all(os.environ)
        if args.pool == "all":
            threads = worker_pools.small_profile_threads(os.environ, args.threads)
            return _run_all(settings, args.processes or 1, threads)
        pool = worker_pools.pool_settings(
            args.pool,
            os.environ,
            namespace=settings.namespace,
            metrics_host=settings.metrics_host,
            cpus=worker_pools.usable_cpus(),
            processes=args.processes,
            threads=args.threads,
        )
        port_setting = f"OUTBOX_{args.pool.upper()}_METRICS_PORT"
        ensure_free(pool.metrics_host, pool.metrics_port, port_setting)
    except ConfigError as exc:
        print(f"outbox worker: cannot start: {exc}", file=sys.stderr)
        return Done(2)
    _become_dramatiq(settings, pool)
    return Done()  # not reached: the process is Dramatiq's now


def _become_dramatiq(settings: Settings, pool: worker_pools.Pool) -> None:
    if pool.niceness:
        os.nice(pool.niceness)  # kept across exec, by the pool's every process
    with contextlib.suppress(OSError):  # the pool's processes say so when they write
        liveness.forget_dead(liveness.state_dir(settings), f"worker-{pool.name}")
    env = {**os.environ, **pool.dramatiq_env()}
    argv = [sys.executable, "-m", "dramatiq", *pool.dramatiq_args()]
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, argv, env)  # noqa: S606 (no shell: the interpreter itself)


def _run_all(settings: Settings, processes: int, threads: Mapping[str, int]) -> Result:
    outbox = [sys.executable, "-m", "outbox.cli"]
    children: dict[str, subprocess.Popen[bytes]] = {
        "relay": subprocess.Popen([*outbox, "relay"]),
        # Posts events to the webhook endpoints; one connection, idle without any.
        "webhooks": subprocess.Popen([*outbox, "webhooks", "deliver"]),
    }
    for pool in worker_pools.POOLS:
        env = dict(os.environ)
        # Each pool's database pool: its threads + 2 unless set (the relay takes 3).
        env.setdefault("OUTBOX_DB_POOL_MAX", str(threads[pool] + 2))
        command = [*outbox, "worker", pool, "-p", str(processes), "-t", str(threads[pool])]
        children[pool] = subprocess.Popen(command, env=env)
    stopped = threading.Event()

    def stop_all(signum: int, frame: object) -> None:
        stopped.set()
        _signal_all(children.values(), signal.SIGTERM)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop_all)
    first = _first_to_exit(children, stopped)
    _signal_all(children.values(), signal.SIGTERM)
    shutdown = worker_pools.whole_number(os.environ, "OUTBOX_WORKER_SHUTDOWN_SECONDS")
    for child in children.values():
        try:
            child.wait(timeout=shutdown + 5)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
    if stopped.is_set():
        return Done(128 + signal.SIGTERM)
    code = first.returncode if first is not None else 0
    return Done(128 - code if code < 0 else code)


def _first_to_exit(
    children: Mapping[str, subprocess.Popen[bytes]], stopped: threading.Event
) -> subprocess.Popen[bytes] | None:
    while not stopped.wait(0.2):
        for name, child in children.items():
            if child.poll() is not None:
                print(
                    f"outbox worker all: {name} exited ({child.returncode}); stopping the others",
                    file=sys.stderr,
                )
                return child
    return None


def _signal_all(children: Iterable[subprocess.Popen[bytes]], signum: int) -> None:
    for child in children:
        if child.poll() is None:
            child.send_signal(signum)
