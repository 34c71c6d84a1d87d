"""What the HTTP provider transports share: one client each, and failures by stage.

Where an exchange broke off decides what it means, as with SMTP: a request
that never connected, or was cut off while being written, cannot have been
accepted (retry); once the whole request left, the provider may have
accepted it, so a lost response is uncertain unless the provider
de-duplicates on an idempotency key (:func:`outbox.delivery.classify.classify_http`).
"""

from __future__ import annotations

import datetime as dt
import email.utils
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import httpx
import orjson

from outbox.models import HttpReply, Stage

USER_AGENT = "outbox/0.1 (+httpx)"

# (status, body, headers) -> what the provider said, read by its own rules.
Parse = Callable[[int, bytes, Mapping[str, str]], HttpReply]


@dataclass(frozen=True)
class HttpConfig:
    base_url: str
    connect_timeout: float = 10.0
    read_timeout: float = 30.0  # also bounds writing the request
    max_connections: int = 0  # 0: httpx's default pool


def make_client(config: HttpConfig, headers: Mapping[str, str]) -> httpx.Client:
    """One pooled, thread-safe client per transport, reused for every send."""
    limits = (
        httpx.Limits(
            max_connections=config.max_connections, max_keepalive_connections=config.max_connections
        )
        if config.max_connections > 0
        else httpx.Limits()
    )
    return httpx.Client(
        base_url=config.base_url,
        headers={"User-Agent": USER_AGENT, **headers},
        timeout=httpx.Timeout(
            config.read_timeout, connect=config.connect_timeout, pool=config.connect_timeout
        ),
        limits=limits,
        follow_redirects=False,  # a redirected send would be a misconfigured URL
    )


def post_json(
    client: httpx.Client,
    path: str,
    payload: Mapping[str, Any],
    *,
    parse: Parse,
    headers: Mapping[str, str] | None = None,
    idempotent: bool = False,
    before_send: Callable[[], None] | None = None,
) -> HttpReply:
    """POST ``payload`` as JSON; never raises for what the network or the provider did.

    ``before_send`` runs when the request is ready and about to leave: the
    point after which the provider may act on it (the SMTP end-of-data dot's
    counterpart), where delivery waits for the thread's previous result.
    """
    try:
        body = orjson.dumps(payload)
    except TypeError as exc:
        return HttpReply(Stage.REQUEST, error=f"could not encode the request: {exc}")
    request_headers = {"Content-Type": "application/json", "Accept": "application/json"}
    if before_send is not None:
        before_send()
    try:
        response = client.post(path, content=body, headers={**request_headers, **(headers or {})})
    except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError) as exc:
        return HttpReply(Stage.CONNECT, error=describe(exc), idempotent=idempotent)
    except (
        httpx.WriteError,
        httpx.WriteTimeout,
        httpx.LocalProtocolError,
        httpx.UnsupportedProtocol,
    ) as exc:
        # The request was not complete, so the provider cannot have acted on it.
        return HttpReply(Stage.REQUEST, error=describe(exc), idempotent=idempotent)
    except httpx.HTTPError as exc:
        # Read timeouts, a connection closed without a response: the request left.
        return HttpReply(Stage.RESPONSE, error=describe(exc), idempotent=idempotent)
    return replace(
        parse(response.status_code, response.content, response.headers), idempotent=idempotent
    )


def json_object(body: bytes) -> dict[str, Any]:
    """The JSON object in ``body``, or an empty one (a proxy's HTML error page)."""
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def body_excerpt(body: bytes, limit: int = 200) -> str:
    return body[:limit].decode("utf-8", "replace").strip()


def retry_after(value: str | None, *, now: dt.datetime | None = None) -> float | None:
    """Seconds from a Retry-After header: delay-seconds or an HTTP-date (RFC 9110 10.2.3)."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.isdigit():
        return float(value)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:  # RFC 9110's IMF-fixdate is always GMT
        when = when.replace(tzinfo=dt.UTC)
    return max(0.0, (when - (now or dt.datetime.now(dt.UTC))).total_seconds())


def describe(exc: BaseException) -> str:
    if isinstance(exc, httpx.TimeoutException):
        return f"timeout ({type(exc).__name__})"
    detail = str(exc) or type(exc).__name__
    if isinstance(exc, httpx.ConnectError):
        return f"connect: {detail}"
    return f"{type(exc).__name__}: {detail}"
