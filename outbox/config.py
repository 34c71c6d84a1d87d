"""Settings: the one reader of ``os.environ``.

Every knob is an environment variable (twelve-factor) with a default that
works against the local servers; the README lists them all.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from email.utils import parseaddr
from functools import cache
from pathlib import Path
from typing import Any

from outbox import keys
from outbox.errors import ConfigError
from outbox.pacing.rules import RateLimits

PACKAGE_TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True)
class Settings:
    database_url: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    schema: str = ""  # the outbox's own Postgres schema; empty: the connection's search_path
    redis_url: str = "redis://127.0.0.1:6379/0"
    broker_url: str = ""  # redis://… or amqp://… (RabbitMQ); empty: REDIS_URL
    listen_database_url: str = ""  # a direct connection for the relay's LISTEN; empty: DATABASE_URL
    prepared_statements: str = "on"  # off behind PgBouncer < 1.21 in transaction mode
    smtp_url: str = "smtp://127.0.0.1:1025"
    smtp_starttls: str = "opportunistic"  # never | opportunistic | required
    smtp_connect_timeout: float = 10.0
    smtp_command_timeout: float = 60.0
    smtp_attempt_timeout: float = 0.0  # a whole attempt; 0: connect + 2 * command timeout
    smtp_ca_file: str = ""  # CA bundle for a relay with a private certificate
    transport: str = "smtp"  # smtp | postmark | resend | ses (outbox.transports.select)
    transport_concurrency: int = 0  # sends at once per worker process; 0: no limit
    send_concurrency: int = 0  # sends at once across all worker processes (Redis); 0: no cap
    failover_transport: str = ""  # a second transport for when the first is down; empty: none
    failover_smtp_url: str = ""  # SMTP_URL of the failover transport; empty: SMTP_URL
    failover_provider_url: str = ""  # OUTBOX_PROVIDER_URL of the failover; empty: the same
    failover_threshold: int = 5  # consecutive outage replies that switch to the failover
    failover_cooldown_seconds: float = 60.0  # then the primary is tried again
    provider_url: str = ""  # the provider API's base URL; empty: the provider's own
    http_connect_timeout: float = 10.0  # seconds to connect to a provider's API
    http_read_timeout: float = 30.0  # seconds to wait for a provider's response
    postmark_server_token: str = ""
    postmark_message_stream: str = "outbound"
    resend_api_key: str = ""
    ses_region: str = ""  # empty: AWS_REGION, AWS_DEFAULT_REGION or the AWS profile's
    ses_configuration_set: str = ""  # SES event publishing; empty: none
    rate_limits: str = ""  # per receiver: "gmail.com=20/s, outlook.com=10/s, *=50/s"
    send_rate: str = ""  # all sends of all workers together, e.g. "100/s"; empty: no cap
    domain_groups: str = ""  # more domains per receiver: "gmail.com=acme.com; outlook.com=b.org"
    pace_by_mx: str = "off"  # on: other domains are paced as their MX host's receiver
    dns_resolver: str = ""  # host[:port] for MX lookups; empty: the system's resolver
    pace_wait_bulk: float = 0.2  # seconds a bulk send may wait for its slot before going back
    pace_wait_high: float = 2.0  # the same for login codes and other high-priority mail
    pace_floor: float = 0.1  # a throttled receiver's pace never drops below this share
    pace_recovery_seconds: float = 300.0  # a throttled pace grows back to full over this time
    sender: str = "Outbox <no-reply@outbox.localhost>"  # OUTBOX_FROM
    sender_domains: str = ""  # comma-separated domains a sender= may use; empty: OUTBOX_FROM's
    message_id_domain: str = "outbox.localhost"
    bounce_domain: str = ""  # VERP return paths bounces+TOKEN@this domain; empty: OUTBOX_FROM
    secret: str = ""  # signs VERP and unsubscribe tokens (OUTBOX_SECRET)
    soft_bounce_limit: int = 5  # consecutive soft bounces that suppress an address
    bounce_host: str = "127.0.0.1"  # where `outbox bounces serve` listens
    bounce_port: int = 2525
    metrics_host: str = "127.0.0.1"  # where `outbox metrics` listens; 0.0.0.0 in a container
    metrics_port: int = 9464  # `outbox metrics`; PORT, when set, wins (a platform's web port)
    templates: Path = PACKAGE_TEMPLATES
    attachments_dir: str = ""  # attachment references resolve here; empty: no attachments
    max_attachment_bytes: int = 10 * 1024 * 1024  # the files of one email together
    dkim_selector: str = ""  # DKIM signing when selector, domain and key are all set
    dkim_domain: str = ""
    dkim_private_key: str = ""  # a PEM file's path, or the PEM itself
    dkim_keys: str = ""  # per sending domain: "billing.example.com=sel:/path/key.pem, ..."
    unsubscribe_url: str = ""  # https base of one-click unsubscribe links for bulk mail
    postmark_webhook_auth: str = ""  # user:password of Postmark's bounce webhook; empty: off
    resend_webhook_secret: str = ""  # whsec_… signing secret of Resend's webhook; empty: off
    namespace: str = "outbox"  # prefix of broker queues and keys
    max_in_flight: int = 2000  # rows queued or sending, per priority
    bulk_batch: int = 25  # rows per broker message for bulk mail
    claim_batch: int = 500  # rows claimed per relay round
    poll_interval: float = 1.0  # relay fallback when no NOTIFY arrives
    stuck_seconds: float = 60.0  # a relay or worker silent this long is presumed dead
    sweep_interval: float = 15.0
    retry_base_seconds: float = 30.0
    retry_cap_seconds: float = 6 * 3600.0
    max_attempts: int = 8
    max_age_seconds: float = 24 * 3600.0
    greylist_min_seconds: float = 60.0
    retry_jitter: str = "full"  # full | none (a baseline for measuring retry waves)
    on_uncertain: str = "retry"  # retry | hold
    max_params_bytes: int = 64 * 1024
    max_content_bytes: int = 1024 * 1024  # subject, text and html of an email without a template
    pool_timeout: float = 10.0  # seconds a worker waits for a database connection from its pool
    outage_threshold: int = 3  # consecutive failures of our own sending path that mark it down
    outage_probe_seconds: float = 5.0  # while the sending path is down, one probe send this often
    previous_secrets: str = ""  # comma-separated earlier OUTBOX_SECRETs, still verified
    smtp_plaintext_auth: str = "never"  # never | loopback: SMTP credentials without TLS
    bounce_max_recipients: int = 10  # recipients the bounce server takes per message
    bounce_max_messages: int = 100  # messages the bounce server takes per connection
    bounce_peer_bytes_per_hour: int = 100 * 2**20  # what one peer address may send per hour
    bounce_metrics_port: int = 0  # the bounce server's own /metrics (refused input); 0: off
    web_concurrency: int = 200  # requests `outbox web` serves at once; past it, 503
    web_connections: int = 1000  # connections it holds at once (idle ones give way)
    web_peer_connections: int = 100  # connections one client address may hold at once
    web_backlog: int = 2048  # its listen queue
    web_timeout: float = 10.0  # seconds a client has to send a whole request
    web_pool_size: int = 16  # Postgres connections of `outbox web` (requests committing at once)
    api_rate: float = 100.0  # HTTP API requests per second per key, per `outbox web` process
    api_burst: int = 200  # requests a key may make at once before the rate applies
    retention_days: int = 0  # the relay purges finished emails older than this, daily; 0: never
    metrics_auth: str = ""  # `outbox web` serves /metrics: user:password (basic) or a token
    db_pool_max: int = 16  # connections at most in each worker process's pool
    console_users: str = ""  # /console sign-ins: "name:role:argon2-hash ..." or a file; empty: off
    console_sso_header: str = ""  # a trusted proxy's header naming the signed-in user; empty: off
    console_trusted_proxies: str = ""  # addresses (or CIDRs) whose SSO header is believed
    console_secure_cookie: str = "on"  # off: the session cookie also travels over plain http
    console_session_seconds: float = 8 * 3600.0  # a console session lasts this long
    grafana_url: str = ""  # the console links to these when set
    jaeger_url: str = ""
    state_dir: str = ""  # each process's liveness file, for `outbox health`; empty: per namespace
    rabbitmq_queue_type: str = "classic"  # quorum: queues replicated across a RabbitMQ cluster
    rabbitmq_delivery_limit: int = 20  # deliveries of a message before it goes back to Postgres
    webhook_allow_private: str = "0"  # 1: webhooks may go to private and loopback addresses
    webhook_concurrency: int = 64  # requests `outbox webhooks deliver` has open per endpoint
    webhook_timeout: float = 10.0  # seconds each phase of a webhook request may take

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> Settings:
        env = os.environ if environ is None else environ
        values: dict[str, Any] = {}
        for field in fields(cls):
            name = ENV_NAMES.get(field.name, f"OUTBOX_{field.name.upper()}")
            raw = env.get(name)
            if raw is None or raw == "":
                continue
            values[field.name] = _parse(name, raw, field.type)
        settings = cls(**values)
        settings.validate()
        return settings

    def to_env(self) -> dict[str, str]:
        """The environment that gives a child process these settings."""
        return {
            ENV_NAMES.get(f.name, f"OUTBOX_{f.name.upper()}"): str(getattr(self, f.name))
            for f in fields(self)
        }

    def validate(self) -> None:
        """Raise :class:`ConfigError` on the first setting that cannot work, in a fixed order."""
        problem = schema_problem(self.schema)
        if problem:
            raise ConfigError(problem)
        for name in ("smtp_starttls", "retry_jitter", "on_uncertain"):
            self._check_choice(name)
        for name in _AT_LEAST_ONE:
            if getattr(self, name) < 1:
                raise ConfigError(f"OUTBOX_{name.upper()} must be at least 1")
        self._validate_secrets()
        for name in ("prepared_statements", "pace_by_mx"):
            self._check_choice(name)
        self._validate_pacing()
        self._validate_timeouts()
        self.rate_limits_parsed()  # raises on a malformed rate
        self._validate_web()
        self._validate_console()
        self._check_choice("smtp_plaintext_auth")
        self._check_choice("webhook_allow_private")
        if not 0 < self.webhook_timeout <= 60:
            raise ConfigError("OUTBOX_WEBHOOK_TIMEOUT must be more than 0 and at most 60 seconds")
        _check_sender(self.sender)
        self.sender_domain_list()  # raises on an empty entry
        if not self.templates.is_dir():
            raise ConfigError(f"OUTBOX_TEMPLATES: {self.templates} is not a directory")
        self._check_choice("rabbitmq_queue_type")

    def _check_choice(self, name: str) -> None:
        allowed = _CHOICES[name]
        if getattr(self, name) not in allowed:
            listed = f"{', '.join(allowed[:-1])} or {allowed[-1]}"
            raise ConfigError(f"OUTBOX_{name.upper()} must be {listed}")

    def _validate_secrets(self) -> None:
        if self.secret:
            keys.check("OUTBOX_SECRET", self.secret)
        for previous in self.previous_secret_list:
            keys.check("OUTBOX_PREVIOUS_SECRETS (one of them)", previous)
        if self.previous_secrets and not self.secret:
            raise ConfigError("OUTBOX_PREVIOUS_SECRETS needs OUTBOX_SECRET, which signs")
        if self.bounce_domain and not self.secret:
            raise ConfigError("OUTBOX_BOUNCE_DOMAIN needs OUTBOX_SECRET to sign return paths")

    def _validate_pacing(self) -> None:
        if not 0 < self.pace_floor <= 1:
            raise ConfigError("OUTBOX_PACE_FLOOR must be above 0 and at most 1")
        if self.pace_recovery_seconds <= 0:
            raise ConfigError("OUTBOX_PACE_RECOVERY_SECONDS must be above 0")
        if self.pace_wait_bulk < 0 or self.pace_wait_high < 0:
            raise ConfigError("OUTBOX_PACE_WAIT_BULK and OUTBOX_PACE_WAIT_HIGH must be 0 or more")

    def _validate_web(self) -> None:
        if self.web_timeout <= 0:
            raise ConfigError("OUTBOX_WEB_TIMEOUT must be above 0")
        if self.api_rate <= 0:
            raise ConfigError("OUTBOX_API_RATE must be above 0")
        if self.retention_days < 0:
            raise ConfigError("OUTBOX_RETENTION_DAYS must be 0 (keep everything) or more")

    @property
    def console_enabled(self) -> bool:
        """``/console`` is served only when someone can sign in to it."""
        return bool(self.console_users or self.console_sso_header)

    def _validate_console(self) -> None:
        if self.console_secure_cookie not in {"on", "off"}:
            raise ConfigError("OUTBOX_CONSOLE_SECURE_COOKIE must be on or off")
        if self.console_session_seconds < 60:
            raise ConfigError("OUTBOX_CONSOLE_SESSION_SECONDS must be at least 60")
        if self.console_enabled and not self.secret:
            raise ConfigError("the console needs OUTBOX_SECRET to sign its sessions")
        if self.console_sso_header and not self.console_trusted_proxies:
            raise ConfigError(
                "OUTBOX_CONSOLE_SSO_HEADER needs OUTBOX_CONSOLE_TRUSTED_PROXIES: anyone else "
                "could send the header"
            )
        for name in ("grafana_url", "jaeger_url"):
            value = getattr(self, name)
            if value and not value.startswith(("http://", "https://")):
                raise ConfigError(f"OUTBOX_{name.upper()} must be an http:// or https:// URL")

    @property
    def listen_url(self) -> str:
        """Where the relay LISTENs: OUTBOX_LISTEN_DATABASE_URL, else DATABASE_URL."""
        return self.listen_database_url or self.database_url

    @property
    def broker(self) -> str:
        """The broker's URL: OUTBOX_BROKER_URL, else REDIS_URL."""
        return self.broker_url or self.redis_url

    def _validate_timeouts(self) -> None:
        """The bounds of one attempt, and of the presumption that a process is gone.

        A send is bounded by its transport's timeouts and the pool wait; a row is
        swept only when the process holding it stopped beating (every
        :meth:`heartbeat_seconds`), never for taking long: so these only need to
        be positive and consistent with each other.
        """
        positive = (
            "smtp_connect_timeout",
            "smtp_command_timeout",
            "http_connect_timeout",
            "http_read_timeout",
            "pool_timeout",
            "outage_probe_seconds",
            "sweep_interval",
            "poll_interval",
        )
        for name in positive:
            if getattr(self, name) <= 0:
                raise ConfigError(f"OUTBOX_{name.upper()} must be above 0")
        if self.smtp_attempt_timeout < 0 or (
            self.smtp_attempt_timeout and self.smtp_attempt_timeout < self.smtp_connect_timeout
        ):
            raise ConfigError(
                "OUTBOX_SMTP_ATTEMPT_TIMEOUT must be 0 (connect + 2 x command timeout)"
                " or at least OUTBOX_SMTP_CONNECT_TIMEOUT"
            )
        if self.stuck_seconds < 1:
            raise ConfigError("OUTBOX_STUCK_SECONDS must be at least 1 (heartbeats every sixth)")
        if self.outage_threshold < 1:
            raise ConfigError("OUTBOX_OUTAGE_THRESHOLD must be at least 1")

    def heartbeat_seconds(self) -> float:
        """How often relays and workers say they are alive: six beats per stuck threshold."""
        return min(5.0, self.stuck_seconds / 6)

    def attempt_seconds(self) -> float:
        """The longest one send can take through the configured transport (and its failover)."""
        smtp_default = self.smtp_connect_timeout + 2 * self.smtp_command_timeout
        smtp = self.smtp_attempt_timeout or smtp_default
        http = self.http_connect_timeout + self.http_read_timeout
        names = {self.transport, self.failover_transport} - {""}
        bound = max(smtp if name == "smtp" else http for name in names)
        # With a failover, one send may try both the primary and the failover.
        return (2 * bound if self.failover_transport else bound) + self.pool_timeout

    @property
    def previous_secret_list(self) -> tuple[str, ...]:
        """Secrets that still verify tokens signed before a rotation (never sign)."""
        return keys.previous(self.previous_secrets)

    def sender_domain_list(self) -> tuple[str, ...]:
        """The domains a message's sender may use: OUTBOX_SENDER_DOMAINS, else OUTBOX_FROM's."""
        if not self.sender_domains.strip():
            return (parseaddr(self.sender)[1].rpartition("@")[2],)
        domains = tuple(d.strip() for d in self.sender_domains.split(","))
        if not all(domains):
            raise ConfigError("OUTBOX_SENDER_DOMAINS has an empty entry")
        return domains

    def rate_limits_parsed(self) -> RateLimits:
        return RateLimits.parse(self.rate_limits, self.send_rate, self.domain_groups)


# Settings that take one of a few words (the error message lists them in this order).
_CHOICES: dict[str, tuple[str, ...]] = {
    "smtp_starttls": ("never", "opportunistic", "required"),
    "retry_jitter": ("full", "none"),
    "on_uncertain": ("retry", "hold"),
    "prepared_statements": ("on", "off"),
    "pace_by_mx": ("on", "off"),
    "smtp_plaintext_auth": ("never", "loopback"),
    "rabbitmq_queue_type": ("classic", "quorum"),
    "webhook_allow_private": ("0", "1"),
}

# Counts and sizes for which 0 would mean nothing can ever be sent or served.
_AT_LEAST_ONE = (
    "max_in_flight",
    "bulk_batch",
    "claim_batch",
    "max_attempts",
    "max_content_bytes",
    "bounce_max_recipients",
    "bounce_max_messages",
    "bounce_peer_bytes_per_hour",
    "web_concurrency",
    "web_connections",
    "web_peer_connections",
    "web_backlog",
    "api_burst",
    "web_pool_size",
    "db_pool_max",
    "rabbitmq_delivery_limit",
    "webhook_concurrency",
)

ENV_NAMES = {
    "database_url": "DATABASE_URL",
    "redis_url": "REDIS_URL",
    "smtp_url": "SMTP_URL",
    "sender": "OUTBOX_FROM",
}


# A schema name Postgres takes unquoted and every tool can type: lowercase,
# 63 bytes at most (NAMEDATALEN), not pg_* (reserved for the system).
_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def schema_problem(name: str) -> str | None:
    """Why ``name`` cannot be OUTBOX_SCHEMA; None when it can (empty: the search_path)."""
    if name == "":
        return None
    if not _SCHEMA.fullmatch(name):
        return (
            f"OUTBOX_SCHEMA={name!r} must be a lowercase name of letters, digits and"
            " underscores, at most 63, not starting with a digit"
        )
    if name.startswith("pg_") or name == "information_schema":
        return f"OUTBOX_SCHEMA={name!r} is a name Postgres keeps for itself"
    return None


def schema_from_env(environ: Mapping[str, str] | None = None) -> str:
    """OUTBOX_SCHEMA alone, checked: what the SQL layer needs before any other setting."""
    name = (os.environ if environ is None else environ).get("OUTBOX_SCHEMA", "")
    problem = schema_problem(name)
    if problem:
        raise ConfigError(problem)
    return name


def _check_sender(sender: str) -> None:
    """OUTBOX_FROM goes into every From header: one address, no line breaks."""
    if any(c in sender for c in "\r\n\x00"):
        raise ConfigError("OUTBOX_FROM must be one line")
    _, address = parseaddr(sender)
    local, at, domain = address.rpartition("@")
    if not at or not local or "." not in domain or " " in address:
        raise ConfigError("OUTBOX_FROM must be an address such as 'Shop <no-reply@shop.example>'")


def _parse(name: str, raw: str, kind: Any) -> Any:
    kind = kind if isinstance(kind, str) else kind.__name__
    try:
        if kind == "int":
            return int(raw)
        if kind == "float":
            return float(raw)
        if kind == "Path":
            return Path(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r} is not a valid {kind}") from None
    return raw


@cache
def default_settings() -> Settings:
    """Settings from the process environment, read once."""
    return Settings.from_env()
