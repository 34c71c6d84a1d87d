"""What each process checks before it does anything, and who reads which setting.

A setting a process cannot work with must stop it at start, with one line that
names the variable, rather than let it report "ready" and fail every message
later. :func:`settings_or_exit` is what each process calls first; ``outbox
config check`` runs every process's checks at once.

Settings the application and the workers must agree on are not left to agree
by chance: the From address is stored with each row at enqueue, and templates
are stored by version in Postgres when a row names them (a worker renders the
stored version). ``OUTBOX_ATTACHMENTS_DIR`` names files by reference and must
be the same storage for both: the worker refuses to start when it is set but
is not a readable directory.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from urllib.parse import urlsplit

from outbox import url_credentials
from outbox.broker_urls import amqp_nodes, is_sentinel_url, parse_sentinel_url, split_nodes
from outbox.config import ENV_NAMES, Settings
from outbox.errors import ConfigError, OutboxError

PROCESSES = ("app", "relay", "worker", "web", "bounces", "metrics", "webhooks")
_ALL = frozenset(PROCESSES)
_SENDERS = frozenset({"worker"})

# Which processes read each setting ("app" is the application that enqueues;
# "web" enqueues too, through its HTTP API).
READERS: dict[str, frozenset[str]] = {
    "database_url": _ALL,
    "schema": _ALL,
    "listen_database_url": frozenset({"relay"}),
    "prepared_statements": frozenset({"relay", "worker", "web", "bounces"}),
    "redis_url": frozenset({"relay", "worker", "metrics"}),
    "broker_url": frozenset({"relay", "worker"}),
    "namespace": frozenset({"relay", "worker", "metrics"}),
    "sender": frozenset({"app", "worker", "web"}),  # worker: rows enqueued before it was stored
    "sender_domains": frozenset({"app", "web"}),
    "message_id_domain": frozenset({"app", "web"}),
    "templates": frozenset({"app", "worker", "web"}),
    "attachments_dir": frozenset({"app", "worker", "web"}),
    "max_attachment_bytes": frozenset({"app", "worker", "web"}),
    "max_params_bytes": frozenset({"app", "web"}),
    "max_content_bytes": frozenset({"app", "web"}),
    "bounce_domain": frozenset({"worker", "bounces"}),
    "secret": frozenset({"app", "worker", "web", "bounces", "webhooks"}),  # app: Message-IDs
    "previous_secrets": frozenset({"worker", "web", "bounces", "webhooks"}),
    "smtp_plaintext_auth": frozenset({"worker"}),
    "bounce_max_recipients": frozenset({"bounces"}),
    "bounce_max_messages": frozenset({"bounces"}),
    "bounce_peer_bytes_per_hour": frozenset({"bounces"}),
    "bounce_metrics_port": frozenset({"bounces"}),
    "web_concurrency": frozenset({"web"}),
    "web_connections": frozenset({"web"}),
    "web_peer_connections": frozenset({"web"}),
    "web_backlog": frozenset({"web"}),
    "web_timeout": frozenset({"web"}),
    "web_pool_size": frozenset({"web"}),
    "api_rate": frozenset({"web"}),
    "api_burst": frozenset({"web"}),
    "retention_days": frozenset({"relay"}),
    "metrics_auth": frozenset({"web"}),
    "db_pool_max": frozenset({"worker"}),
    "console_users": frozenset({"web"}),
    "console_sso_header": frozenset({"web"}),
    "console_trusted_proxies": frozenset({"web"}),
    "console_secure_cookie": frozenset({"web"}),
    "console_session_seconds": frozenset({"web"}),
    "grafana_url": frozenset({"web"}),
    "jaeger_url": frozenset({"web"}),
    "soft_bounce_limit": frozenset({"web", "bounces"}),
    "bounce_host": frozenset({"bounces"}),
    "bounce_port": frozenset({"bounces"}),
    "metrics_host": frozenset({"metrics"}),
    "metrics_port": frozenset({"metrics"}),
    "unsubscribe_url": frozenset({"worker"}),
    "postmark_webhook_auth": frozenset({"web"}),
    "resend_webhook_secret": frozenset({"web"}),
    "max_in_flight": frozenset({"relay"}),
    "bulk_batch": frozenset({"relay"}),
    "claim_batch": frozenset({"relay"}),
    "poll_interval": frozenset({"relay"}),
    "sweep_interval": frozenset({"relay"}),
    "stuck_seconds": frozenset({"relay", "worker"}),
    "pool_timeout": frozenset({"relay", "worker"}),
    "outage_threshold": frozenset({"relay", "worker"}),
    "outage_probe_seconds": frozenset({"relay", "worker"}),
    "rate_limits": frozenset({"worker", "metrics"}),
    "send_rate": frozenset({"worker", "metrics"}),
    "domain_groups": frozenset({"worker", "metrics"}),
    "state_dir": frozenset({"relay", "worker", "web", "bounces", "metrics"}),
    "rabbitmq_queue_type": frozenset({"relay", "worker"}),
    "rabbitmq_delivery_limit": frozenset({"relay", "worker"}),
    "webhook_allow_private": frozenset({"webhooks"}),
    "webhook_concurrency": frozenset({"webhooks"}),
    "webhook_timeout": frozenset({"webhooks"}),
}
_WORKER_PREFIXES = (
    "smtp_", "transport", "send_", "failover_", "provider_", "http_", "postmark_", "resend_",
    "ses_", "pace_", "dns_", "dkim_", "retry_", "max_attempts", "max_age", "greylist_",
    "on_uncertain",
)  # fmt: skip

# Values never printed: keys, tokens, passwords (URLs print with the password masked).
SECRETS = frozenset(
    {
        "secret",
        "previous_secrets",
        "postmark_server_token",
        "resend_api_key",
        "dkim_private_key",
        "postmark_webhook_auth",
        "resend_webhook_secret",
        "metrics_auth",
    }
)
_URLS = frozenset(
    {"database_url", "listen_database_url", "redis_url", "broker_url", "smtp_url",
     "failover_smtp_url"}
)  # fmt: skip


def readers(name: str) -> frozenset[str]:
    if name in READERS:
        return READERS[name]
    if name.startswith(_WORKER_PREFIXES):
        return _SENDERS
    raise KeyError(name)


@dataclass(frozen=True)
class Shown:
    env: str
    value: str
    readers: tuple[str, ...]
    default: bool


def effective(settings: Settings) -> list[Shown]:
    """Every setting as a process would see it, secrets masked."""
    defaults = Settings()
    shown = []
    for field in fields(Settings):
        value = getattr(settings, field.name)
        shown.append(
            Shown(
                env=ENV_NAMES.get(field.name, f"OUTBOX_{field.name.upper()}"),
                value=masked(field.name, str(value)),
                readers=tuple(p for p in PROCESSES if p in readers(field.name)),
                default=value == getattr(defaults, field.name),
            )
        )
    return shown


def masked(name: str, value: str) -> str:
    if not value:
        return ""
    if name in SECRETS:
        return "****"
    if name in _URLS:
        return ",".join(url_credentials.masked(node) for node in split_nodes(value))
    return value


def problems(settings: Settings, processes: Iterable[str] = PROCESSES) -> list[str]:
    """What stops each of ``processes`` from starting, one line each."""
    found: list[str] = []
    for process in processes:
        for check in _CHECKS[process]:
            try:
                check(settings)
            except ConfigError as exc:
                line = str(exc)
                if line not in found:
                    found.append(line)
    return found


def settings_or_exit(process: str, environ: dict[str, str] | None = None) -> Settings:
    """The process's settings, or exit 2 with one line per problem on stderr."""
    try:
        settings = Settings.from_env(os.environ if environ is None else environ)
    except ConfigError as exc:
        _exit(process, [str(exc)])
    found = problems(settings, [process])
    if found:
        _exit(process, found)
    if process in _SENDING:
        for line in _warnings(settings):
            print(f"outbox {process}: warning: {line}", file=sys.stderr)
    return settings


# The processes that warn at start about what receivers will hold against a domain.
_SENDING = frozenset({"relay", "worker"})


def _warnings(settings: Settings) -> list[str]:
    """Deliverability warnings; a start-up goes on (see `outbox domain check`)."""
    from outbox.domain_auth.checker import setting_warnings  # noqa: PLC0415

    try:
        return setting_warnings(settings)
    except (ConfigError, OutboxError):
        return []  # a problem the checks above refuse on, or an unusable domain


def _exit(process: str, lines: list[str]) -> None:
    for line in lines:
        print(f"outbox {process}: cannot start: {line}", file=sys.stderr)
    raise SystemExit(2)


_DATABASE_URL_FORM = "postgresql://USER:PASSWORD@HOST:5432/DATABASE, or libpq key=value pairs"


def database_url_problem(url: str) -> str | None:
    """Why ``url`` is not a connection string libpq can read, in one line; None if it is.

    libpq's own complaint quotes the part it choked on, which may be the
    password: quoted parts are left out.
    """
    if "://" in url:
        scheme = url.split("://", 1)[0]
        if scheme not in {"postgresql", "postgres"}:
            return f"DATABASE_URL must be a postgresql:// URL ({_DATABASE_URL_FORM})"
    elif "=" not in url:
        return f"DATABASE_URL must be a postgresql:// URL ({_DATABASE_URL_FORM})"
    # Commands that need no database do not load the driver.
    from outbox.db.store import connections  # noqa: PLC0415

    said = connections.conninfo_problem(url)
    if said is None:
        return None
    said = re.sub(r'"[^"]*"', "…", " ".join(said.split()))
    return f"DATABASE_URL is malformed ({said}); expected {_DATABASE_URL_FORM}"


def _database_url(settings: Settings) -> None:
    problem = database_url_problem(settings.database_url)
    if problem:
        raise ConfigError(problem)


def _broker_url(settings: Settings) -> None:
    from outbox.broker import broker_kind  # noqa: PLC0415

    if settings.broker_url:
        kind = broker_kind(settings.broker_url)
        if kind == "rabbitmq":
            amqp_nodes(settings.broker_url)
        elif is_sentinel_url(settings.broker_url):
            parse_sentinel_url(settings.broker_url, "OUTBOX_BROKER_URL")


def _redis_url(settings: Settings) -> None:
    if is_sentinel_url(settings.redis_url):
        parse_sentinel_url(settings.redis_url, "REDIS_URL")
        return
    try:
        parts = urlsplit(settings.redis_url)
        _ = parts.port
    except ValueError:
        raise ConfigError("REDIS_URL is not a URL") from None
    if parts.scheme not in {"redis", "rediss", "unix"}:
        raise ConfigError(
            "REDIS_URL must be a redis://, rediss://, unix:// or redis+sentinel:// URL"
        )


def _transport(settings: Settings) -> None:
    from outbox.transports.select import build_transport  # noqa: PLC0415

    try:
        build_transport(settings).close()
    except ValueError:  # urllib's own: a port that is not a number
        raise ConfigError("SMTP_URL must look like smtp://[user:pass@]host[:port]") from None


def _message(settings: Settings) -> None:
    from outbox.message import list_unsubscribe  # noqa: PLC0415
    from outbox.message.dkim import Signers  # noqa: PLC0415

    Signers.from_settings(settings)
    if settings.unsubscribe_url:
        list_unsubscribe.check_base_url(settings.unsubscribe_url, settings.secret)


def _dkim_key(settings: Settings) -> None:
    """A key that cannot sign is a start-up error, not one per message."""
    if (
        settings.dkim_selector
        or settings.dkim_domain
        or settings.dkim_private_key
        or settings.dkim_keys
    ):
        from outbox.message.dkim import Signers  # noqa: PLC0415

        Signers.from_settings(settings)


def _sender_domains(settings: Settings) -> None:
    """Each domain a sender= may use is a valid domain name."""
    from outbox.errors import InvalidAddress  # noqa: PLC0415
    from outbox.fields.senders import normalize_domains  # noqa: PLC0415

    try:
        normalize_domains(settings.sender_domain_list())
    except InvalidAddress as exc:
        raise ConfigError(f"OUTBOX_SENDER_DOMAINS: {exc}") from None


def _smtp_credentials(settings: Settings) -> None:
    """Credentials never go out in clear, unless to a relay on this host by choice."""
    if "smtp" not in {settings.transport, settings.failover_transport}:
        return
    from outbox.transports.smtp import SmtpConfig, is_loopback  # noqa: PLC0415

    for url in (settings.smtp_url, settings.failover_smtp_url):
        if not url:
            continue
        try:
            config = SmtpConfig.from_url(url)
        except (ConfigError, ValueError):
            continue  # a malformed URL is the sending processes' own check (_transport)
        never_tls = settings.smtp_starttls == "never" and not config.implicit_tls
        allowed = settings.smtp_plaintext_auth == "loopback" and is_loopback(config.host)
        if config.username and never_tls and not allowed:
            raise ConfigError(
                "SMTP_URL has credentials but OUTBOX_SMTP_STARTTLS=never: they would go "
                "out in clear; use STARTTLS, smtps://, or OUTBOX_SMTP_PLAINTEXT_AUTH=loopback "
                "for a relay on this host"
            )


# Settings every command and process checks, whatever else it needs: a key or a
# credential that would fail (or leak) later is refused at start.
COMMON: tuple[Callable[[Settings], None], ...] = (_dkim_key, _smtp_credentials)


def _attachments_dir(settings: Settings) -> None:
    where = settings.attachments_dir
    if where and not (os.path.isdir(where) and os.access(where, os.R_OK | os.X_OK)):
        raise ConfigError(f"OUTBOX_ATTACHMENTS_DIR: {where} is not a readable directory")


def _webhooks(settings: Settings) -> None:
    auth = settings.postmark_webhook_auth
    if auth and (":" not in auth or not auth.split(":", 1)[0] or not auth.split(":", 1)[1]):
        raise ConfigError("OUTBOX_POSTMARK_WEBHOOK_AUTH must be user:password")
    if settings.resend_webhook_secret and not settings.resend_webhook_secret.startswith("whsec_"):
        raise ConfigError("OUTBOX_RESEND_WEBHOOK_SECRET must be the whsec_… signing secret")
    _metrics_auth(settings.metrics_auth)


def _metrics_auth(auth: str) -> None:
    """A scrape credential an outsider cannot guess: /metrics tells how much mail flows."""
    if not auth:
        return
    if ":" in auth:
        user, _, password = auth.partition(":")
        if not user or len(password) < 16:
            raise ConfigError(
                "OUTBOX_METRICS_AUTH must be user:password with a password of 16 characters"
                " or more, or a bearer token of 32 or more"
            )
    elif len(auth) < 32:
        raise ConfigError("OUTBOX_METRICS_AUTH as a bearer token needs 32 characters or more")


def _console(settings: Settings) -> None:
    """A user list or proxy list that cannot be read stops `outbox web` at start."""
    if settings.console_enabled:
        from outbox.web.console_auth import Access  # noqa: PLC0415

        Access.from_settings(settings)


_CHECKS: dict[str, tuple[Callable[[Settings], None], ...]] = {
    "app": (*COMMON, _database_url, _attachments_dir, _sender_domains),
    "relay": (*COMMON, _database_url, _redis_url, _broker_url),
    "worker": (
        *COMMON,
        _database_url,
        _redis_url,
        _broker_url,
        _transport,
        _message,
        _attachments_dir,
    ),
    "web": (*COMMON, _database_url, _webhooks, _console),
    # Without OUTBOX_BOUNCE_DOMAIN the bounce server stays up idle and says so.
    "bounces": (*COMMON, _database_url),
    "metrics": (*COMMON, _database_url, _redis_url),
    "webhooks": (*COMMON, _database_url),
}


def common_problems(settings: Settings) -> list[str]:
    """What every command refuses to start on (the COMMON checks)."""
    found = []
    for check in COMMON:
        try:
            check(settings)
        except ConfigError as exc:
            found.append(str(exc))
    return found
