"""The transport the settings name: ``OUTBOX_TRANSPORT`` (default ``smtp``).

The name picks the provider; ``OUTBOX_PROVIDER_URL`` only moves its API (a
regional endpoint, a proxy, a local fake), and ``SMTP_URL`` stays SMTP's.
Provider modules are imported only when chosen (boto3 alone takes a third
of a second to import).
"""

from __future__ import annotations

import dataclasses
import logging
from urllib.parse import urlsplit

from outbox.config import Settings
from outbox.errors import ConfigError
from outbox.transports.base import Transport
from outbox.transports.failover import Breaker, Failover
from outbox.transports.limit import Limited
from outbox.transports.smtp import SmtpConfig, SmtpTransport

log = logging.getLogger(__name__)

TRANSPORTS = ("smtp", "postmark", "resend", "ses")
RESEND_KEY_HOURS = 24  # how long Resend remembers an idempotency key


def build_transport(settings: Settings) -> Transport:
    """The configured transport: behind the per-process concurrency limit when one
    is set, with the failover transport beside it when one is named, and under
    the cap shared by all worker processes when one is set."""
    check(settings)
    transport = _limited(settings, _build(settings))
    if settings.failover_transport:
        transport = _with_failover(settings, transport)
    if settings.send_concurrency > 0:
        transport = _shared_limited(settings, transport)
    return transport


def _with_failover(settings: Settings, transport: Transport) -> Transport:
    secondary_settings = failover_settings(settings)
    check(secondary_settings)
    same_url = (secondary_settings.smtp_url, secondary_settings.provider_url) == (
        settings.smtp_url,
        settings.provider_url,
    )
    if secondary_settings.transport == settings.transport and same_url:
        raise ConfigError("OUTBOX_FAILOVER_TRANSPORT is the primary transport itself")
    return Failover(
        transport,
        _limited(secondary_settings, _build(secondary_settings)),
        names=(settings.transport, f"{settings.failover_transport} (failover)"),
        breaker=Breaker(
            threshold=settings.failover_threshold, cooldown=settings.failover_cooldown_seconds
        ),
    )


def failover_settings(settings: Settings) -> Settings:
    """The settings of the failover transport: its own name and URLs, the rest shared."""
    return dataclasses.replace(
        settings,
        transport=settings.failover_transport,
        smtp_url=settings.failover_smtp_url or settings.smtp_url,
        provider_url=settings.failover_provider_url or settings.provider_url,
        failover_transport="",
    )


def _shared_limited(settings: Settings, transport: Transport) -> Transport:
    """The cap shared by all worker processes; a lease outlasts the longest attempt."""
    from redis.backoff import NoBackoff  # noqa: PLC0415
    from redis.retry import Retry  # noqa: PLC0415

    from outbox.redis_clients import redis_client  # noqa: PLC0415
    from outbox.transports.shared_limit import SharedLimited  # noqa: PLC0415

    smtp_attempt = settings.smtp_attempt_timeout or (
        settings.smtp_connect_timeout + 2 * settings.smtp_command_timeout
    )
    http_attempt = settings.http_connect_timeout + settings.http_read_timeout
    client = redis_client(
        settings.redis_url, socket_timeout=2, socket_connect_timeout=2, retry=Retry(NoBackoff(), 0)
    )
    return SharedLimited(
        transport,
        client,
        key=f"{settings.namespace}:send-slots",
        limit=settings.send_concurrency,
        lease=2 * max(smtp_attempt, http_attempt) + 5,
    )


def _limited(settings: Settings, transport: Transport) -> Transport:
    if settings.transport_concurrency > 0:
        return Limited(transport, settings.transport_concurrency)
    return transport


def check(settings: Settings) -> None:
    """Refuse settings the chosen transport cannot work with, naming the variable."""
    if settings.transport not in TRANSPORTS:
        raise ConfigError(f"OUTBOX_TRANSPORT must be one of {', '.join(TRANSPORTS)}")
    if settings.failover_transport and settings.failover_transport not in TRANSPORTS:
        raise ConfigError(f"OUTBOX_FAILOVER_TRANSPORT must be one of {', '.join(TRANSPORTS)}")
    if settings.failover_threshold < 1 or settings.failover_cooldown_seconds <= 0:
        raise ConfigError(
            "OUTBOX_FAILOVER_THRESHOLD must be at least 1 and"
            " OUTBOX_FAILOVER_COOLDOWN_SECONDS above 0"
        )
    if settings.transport_concurrency < 0:
        raise ConfigError("OUTBOX_TRANSPORT_CONCURRENCY must be 0 (no limit) or more")
    if settings.send_concurrency < 0:
        raise ConfigError("OUTBOX_SEND_CONCURRENCY must be 0 (no cap) or more")
    if settings.transport == "smtp":
        return
    if settings.http_connect_timeout <= 0 or settings.http_read_timeout <= 0:
        raise ConfigError("OUTBOX_HTTP_CONNECT_TIMEOUT and OUTBOX_HTTP_READ_TIMEOUT must be > 0")
    if settings.provider_url:
        parts = urlsplit(settings.provider_url)
        if parts.scheme not in {"http", "https"} or not parts.hostname:
            raise ConfigError("OUTBOX_PROVIDER_URL must be an http:// or https:// URL")
    if settings.transport == "postmark" and not settings.postmark_server_token:
        raise ConfigError("OUTBOX_TRANSPORT=postmark needs OUTBOX_POSTMARK_SERVER_TOKEN")
    if settings.transport == "resend":
        if not settings.resend_api_key:
            raise ConfigError("OUTBOX_TRANSPORT=resend needs OUTBOX_RESEND_API_KEY")
        if settings.max_age_seconds > RESEND_KEY_HOURS * 3600:
            log.warning(
                "OUTBOX_MAX_AGE_SECONDS is over %d hours, Resend's idempotency window: "
                "a retry after it may deliver a second copy",
                RESEND_KEY_HOURS,
            )


def _build(settings: Settings) -> Transport:
    if settings.transport == "smtp":
        return SmtpTransport(SmtpConfig.from_settings(settings))
    if settings.transport == "ses":
        from outbox.transports.ses import SesConfig, SesTransport  # noqa: PLC0415

        return SesTransport(
            SesConfig(
                region=settings.ses_region,
                endpoint_url=settings.provider_url,
                configuration_set=settings.ses_configuration_set,
                connect_timeout=settings.http_connect_timeout,
                read_timeout=settings.http_read_timeout,
                max_connections=settings.transport_concurrency,
            )
        )
    from outbox.transports.http import HttpConfig  # noqa: PLC0415

    def http_config(default_url: str) -> HttpConfig:
        return HttpConfig(
            base_url=settings.provider_url or default_url,
            connect_timeout=settings.http_connect_timeout,
            read_timeout=settings.http_read_timeout,
            max_connections=settings.transport_concurrency,
        )

    if settings.transport == "postmark":
        from outbox.transports import postmark  # noqa: PLC0415

        return postmark.PostmarkTransport(
            postmark.PostmarkConfig(
                server_token=settings.postmark_server_token,
                message_stream=settings.postmark_message_stream,
                http=http_config(postmark.API_URL),
            )
        )
    from outbox.transports import resend  # noqa: PLC0415

    return resend.ResendTransport(
        resend.ResendConfig(api_key=settings.resend_api_key, http=http_config(resend.API_URL))
    )
