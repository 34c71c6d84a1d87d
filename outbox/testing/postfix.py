"""A private Postfix instance on loopback: a real MTA for tests and benchmarks.

It runs from a temporary directory with its own queue and log, without
chroot, listening on one loopback port, and is stopped and removed on exit.
Debian's ``postfix`` package provides the binaries (``./dev test`` installs it).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from outbox.testing.private_servers import free_port

__all__ = ["Postfix", "PostfixMissing", "free_port", "private_postfix"]

BASE_CF = """\
compatibility_level = 3.6
queue_directory = {root}/queue
data_directory = {root}/data
shlib_directory = /usr/lib/postfix
daemon_directory = /usr/lib/postfix/sbin
meta_directory = /etc/postfix
mail_owner = postfix
setgid_group = postdrop
maillog_file = {root}/maillog
maillog_file_prefixes = {root}
inet_interfaces = 127.0.0.1
inet_protocols = ipv4
mynetworks = 127.0.0.0/8
relayhost =
smtp_dns_support_level = disabled
smtputf8_enable = no
biff = no
"""

# With debconf's "No configuration" only the shipped prototypes exist.
_MASTER_CF = (
    "/etc/postfix/master.cf",
    "/etc/postfix/master.cf.proto",
    "/usr/share/postfix/master.cf.dist",
)


class PostfixMissing(RuntimeError):
    """Postfix is not installed or would not start."""


@dataclass(frozen=True, slots=True)
class Postfix:
    root: Path
    conf: Path
    port: int  # its smtpd, on 127.0.0.1

    @property
    def url(self) -> str:
        return f"smtp://127.0.0.1:{self.port}"

    @property
    def log(self) -> str:
        path = self.root / "maillog"
        return path.read_text() if path.exists() else ""


@contextmanager
def private_postfix(main_cf: str) -> Iterator[Postfix]:
    """Postfix with ``main_cf`` (formatted with ``{root}``) added to a loopback base."""
    if shutil.which("postfix") is None:
        raise PostfixMissing("Postfix is not installed: apt-get install postfix (./dev test does)")
    # Not under a private temporary directory: Postfix's daemons run as the postfix user.
    root = Path(tempfile.mkdtemp(prefix="outbox-postfix-"))
    root.chmod(0o755)
    conf, data = root / "conf", root / "data"
    for directory in (conf, data, root / "queue"):
        directory.mkdir()
    shutil.chown(data, "postfix")
    port = free_port()
    master = next(Path(p).read_text() for p in _MASTER_CF if Path(p).exists())
    lines = []
    for original in master.splitlines():
        fields = original.split()
        if fields[:2] == ["smtp", "inet"]:
            lines.append(f"127.0.0.1:{port} inet n - n - - smtpd")
        elif len(fields) >= 8 and fields[1] in {"unix", "fifo", "pass", "unix-dgram"}:
            fields[4] = "n"  # no chroot: the queue is in a temporary directory
            lines.append(" ".join(fields))
        else:
            lines.append(original)
    (conf / "master.cf").write_text("\n".join(lines) + "\n")
    (conf / "main.cf").write_text((BASE_CF + main_cf).format(root=root))
    instance = Postfix(root, conf, port)
    started = subprocess.run(
        ["postfix", "-c", str(conf), "start"], capture_output=True, text=True, check=False
    )
    try:
        if started.returncode != 0:
            raise PostfixMissing(f"Postfix did not start: {started.stderr}\n{instance.log}")
        yield instance
    finally:
        subprocess.run(["postfix", "-c", str(conf), "stop"], capture_output=True, check=False)
        shutil.rmtree(root, ignore_errors=True)
