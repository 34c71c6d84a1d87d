"""Private servers on loopback for tests and benchmarks: free ports, a throwaway Postgres.

A scenario that takes a server away, or a benchmark that needs a server
setting the machine's shared one lacks, starts its own on a free port in a
temporary directory that is removed afterwards.
"""

from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from outbox.db.store import connections


class ServerUnavailable(RuntimeError):
    """A private server could not be installed, started or reached."""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_ready(check: Callable[[], object], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            if check():
                return
        except Exception as exc:
            last: Exception | None = exc
        else:
            last = None
        if time.monotonic() > deadline:
            raise ServerUnavailable(f"{what} not ready within {timeout}s ({last})")
        time.sleep(0.05)


def _postgres_bindir() -> Path:
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)
    found = candidates[0] if candidates else shutil.which("initdb")
    if not found:
        raise ServerUnavailable(
            "initdb is not installed: a private Postgres cluster needs it"
            " (`apt-get install postgresql`)"
        )
    return Path(found).parent


class PostgresServer:
    """A throwaway cluster on its own port; restarts never touch the shared one.

    initdb refuses to run as root, so as root every command runs as the
    ``postgres`` user in a temporary directory it owns.
    """

    def __init__(self, options: str = "") -> None:
        self.options = options  # more `-c name=value` for the server
        self.bindir = _postgres_bindir()
        self.root = Path(tempfile.mkdtemp(prefix="outbox-faults-pg-"))
        self.data = self.root / "data"
        self.port = free_port()
        self.url = f"postgresql://postgres@127.0.0.1:{self.port}/postgres"
        self._as_user: list[str] = []
        if os.geteuid() == 0:
            if shutil.which("runuser") is None:
                raise ServerUnavailable("runuser is missing: it runs initdb as the postgres user")
            self._as_user = ["runuser", "-u", "postgres", "--"]
            shutil.chown(self.root, "postgres", "postgres")

    def _run(self, *args: str, timeout: float = 60) -> None:
        command = [*self._as_user, *args]
        done = subprocess.run(command, capture_output=True, timeout=timeout, check=False)
        if done.returncode != 0:
            raise AssertionError(
                f"{' '.join(command)} failed ({done.returncode}): "
                f"{done.stdout.decode(errors='replace')}{done.stderr.decode(errors='replace')}"
            )

    def _pg_ctl(self, *args: str) -> None:
        # fsync off is safe here: the page cache outlives a Postgres crash. Commits
        # stay synchronous: an acknowledged commit must survive the crash under test.
        options = (
            f"-p {self.port} -k {self.root} -c listen_addresses=127.0.0.1 "
            f"-c fsync=off -c full_page_writes=off {self.options}"
        )
        self._run(
            str(self.bindir / "pg_ctl"),
            "-D", str(self.data), "-l", str(self.root / "postgres.log"),
            "-o", options, "-w", "-t", "30", *args,
        )  # fmt: skip

    def start(self) -> PostgresServer:
        if not self.data.exists():
            self._run(
                str(self.bindir / "initdb"),
                "-D", str(self.data), "-U", "postgres", "--auth=trust", "--no-sync",
                "-E", "UTF8", "--locale=C",
            )  # fmt: skip
        self._pg_ctl("start")
        wait_ready(self.ping, 30, f"private Postgres on port {self.port}")
        return self

    def start_standby_of(self, primary: PostgresServer, name: str) -> PostgresServer:
        """This cluster, new, as a streaming standby of ``primary`` under ``name``.

        ``pg_basebackup -R`` copies the primary and writes the standby's
        ``primary_conninfo``; the application name is the one the primary's
        ``synchronous_standby_names`` lists.
        """
        if self.data.exists():
            raise ServerUnavailable(f"{self.data} exists: a standby starts from a fresh copy")
        self._run(
            str(self.bindir / "pg_basebackup"),
            "-d", f"host=127.0.0.1 port={primary.port} user=postgres application_name={name}",
            "-D", str(self.data), "-X", "stream", "-R", "--no-sync",
        )  # fmt: skip
        self._pg_ctl("start")
        wait_ready(self.ping, 30, f"standby Postgres on port {self.port}")
        return self

    def promote(self) -> None:
        """A standby made primary (``pg_ctl promote``), returning once it takes writes."""
        self._run(str(self.bindir / "pg_ctl"), "-D", str(self.data), "-w", "-t", "30", "promote")

    def ping(self) -> bool:
        with connections.connect(self.url, timeout=2) as conn:
            connections.ping(conn)
        return True

    def stop(self, mode: str = "fast") -> None:
        self._pg_ctl("stop", "-m", mode)

    def restart(self, mode: str = "fast") -> None:
        self._pg_ctl("restart", "-m", mode)
        wait_ready(self.ping, 30, f"private Postgres on port {self.port}")

    def destroy(self) -> None:
        pid_file = self.data / "postmaster.pid"
        if pid_file.exists():
            with contextlib.suppress(Exception):
                self.stop("immediate")
        if pid_file.exists():  # pg_ctl failed: end the postmaster ourselves
            with contextlib.suppress(Exception):
                pid = int(pid_file.read_text().split()[0])
                os.kill(pid, signal.SIGKILL)
        shutil.rmtree(self.root, ignore_errors=True)
