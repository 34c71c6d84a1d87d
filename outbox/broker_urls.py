"""The broker URLs a deployment past one host writes, read (pure).

Redis under Sentinel: ``redis+sentinel://[[user]:password@]HOST:PORT[,HOST:PORT…]/MASTER[/DB]``
(``rediss+sentinel://`` for TLS, to the sentinels and the master alike). The
hosts are the sentinels; the password is the master's (and its replicas'),
sentinels are asked without one. A RabbitMQ cluster: several ``amqp://`` node
URLs separated by commas, tried in turn.

An error names the variable and what is wrong, never the password.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, unquote, urlsplit

from outbox.errors import ConfigError

SENTINEL_SCHEMES = frozenset({"redis+sentinel", "rediss+sentinel"})
SENTINEL_FORM = "redis+sentinel://[:password@]HOST:PORT[,HOST:PORT…]/MASTER_NAME[/DB]"
# Query options a TLS sentinel URL may carry: redis-py's own names, as in rediss://.
_TLS_OPTIONS = frozenset({"ssl_ca_certs", "ssl_cert_reqs"})
_CERT_REQS = frozenset({"none", "optional", "required"})
_HOST = re.compile(r"\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+")
_MASTER = re.compile(r"[A-Za-z0-9_.-]+")
# A comma that starts another node's URL (a password may hold a comma of its own).
_NEXT_NODE = re.compile(r",\s*(?=amqps?://)")

BadUrl = Callable[[str], ConfigError]
"""Makes the error of a malformed URL from why it is malformed."""


@dataclass(frozen=True)
class SentinelTarget:
    """Where Sentinel is asked for the master, and how to speak to the master."""

    sentinels: tuple[tuple[str, int], ...]
    master: str
    db: int = 0
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    tls: bool = False
    tls_options: tuple[tuple[str, str], ...] = ()


def is_sentinel_url(url: str) -> bool:
    return url.partition("://")[0].lower() in SENTINEL_SCHEMES


def parse_sentinel_url(url: str, variable: str = "REDIS_URL") -> SentinelTarget:
    """The sentinels, master name, database and credentials of a sentinel URL."""

    def bad(why: str) -> ConfigError:
        return ConfigError(f"{variable} is not a Sentinel URL ({why}); expected {SENTINEL_FORM}")

    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SENTINEL_SCHEMES:
        raise bad("the scheme must be redis+sentinel:// or rediss+sentinel://")
    if "#" in rest:
        raise bad("a URL fragment (#) has no meaning here")
    # The last "@" ends the credentials: an unescaped one may sit in a password.
    userinfo, at, location = rest.rpartition("@")
    if at and not userinfo:
        raise bad("nothing before the @")
    location, _, query = location.partition("?")
    hosts, _, path = location.partition("/")
    username, password = _credentials(userinfo) if at else (None, None)
    tls = scheme.lower() == "rediss+sentinel"
    return SentinelTarget(
        sentinels=_sentinels(hosts, bad),
        master=_master(path, bad),
        db=_db(path, bad),
        username=username,
        password=password,
        tls=tls,
        tls_options=_tls_options(query, tls, bad),
    )


def _credentials(userinfo: str) -> tuple[str | None, str | None]:
    user, colon, password = userinfo.partition(":")
    # A lone word is a user name, as redis-py reads redis://word@host.
    return (unquote(user) or None), (unquote(password) if colon else None)


def _sentinels(hosts: str, bad: BadUrl) -> tuple[tuple[str, int], ...]:
    if not hosts:
        raise bad("no sentinel host:port")
    found: list[tuple[str, int]] = []
    for item in hosts.split(","):
        host, colon, port = item.strip().rpartition(":")
        if not colon or not host:
            raise bad(f"{item.strip() or 'an empty entry'!r} is not host:port")
        if not _HOST.fullmatch(host):
            raise bad(f"{host!r} is not a host name or address")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise bad(f"the port of {host!r} is not a number from 1 to 65535")
        found.append((host.strip("[]"), int(port)))
    if len(set(found)) < len(found):
        raise bad("a sentinel is named twice")
    return tuple(found)


def _master(path: str, bad: BadUrl) -> str:
    master = unquote(path.partition("/")[0])
    if not master:
        raise bad("no master name after the hosts")
    if not _MASTER.fullmatch(master):
        raise bad(f"the master name {master!r} has characters Sentinel names do not")
    return master


def _db(path: str, bad: BadUrl) -> int:
    _, slash, db = path.partition("/")
    db = db.rstrip("/")
    if not slash or not db:
        return 0
    if not db.isdigit() or len(db) > 5:
        raise bad(f"the database {db!r} is not a number")
    return int(db)


def _tls_options(query: str, tls: bool, bad: BadUrl) -> tuple[tuple[str, str], ...]:
    if not query:
        return ()
    pairs = parse_qsl(query, keep_blank_values=True)
    for name, value in pairs:
        if name not in _TLS_OPTIONS:
            raise bad(f"unknown option {name!r}: only ssl_ca_certs and ssl_cert_reqs")
        if not tls:
            raise bad(f"{name} needs rediss+sentinel://")
        if name == "ssl_cert_reqs" and value not in _CERT_REQS:
            raise bad("ssl_cert_reqs must be none, optional or required")
        if not value:
            raise bad(f"{name} is empty")
    return tuple(pairs)


def split_nodes(url: str) -> list[str]:
    """The node URLs of a comma-separated list, unchecked (one URL: itself)."""
    return [n.strip() for n in _NEXT_NODE.split(url.strip())]


def amqp_nodes(url: str, variable: str = "OUTBOX_BROKER_URL") -> list[str]:
    """The node URLs of a RabbitMQ cluster, in the order they are tried."""
    nodes = split_nodes(url)
    for node in nodes:
        try:
            parts = urlsplit(node)
            _ = parts.port
        except ValueError:
            raise ConfigError(f"{variable}: a node URL has a port that is not a number") from None
        if parts.scheme not in {"amqp", "amqps"} or not parts.hostname:
            raise ConfigError(
                f"{variable}: each node must be an amqp:// or amqps:// URL with a host,"
                " several separated by commas"
            )
        if "," in parts.netloc.rpartition("@")[2] or "," in parts.path:
            raise ConfigError(
                f"{variable}: separate nodes with a comma before each amqp:// URL"
                " (amqp://h1/vhost,amqp://h2/vhost), not inside one"
            )
    if len(set(nodes)) < len(nodes):
        raise ConfigError(f"{variable}: a node is named twice")
    return nodes
