"""Checks an email must pass before it is written (pure but for the address library).

Every check raises an :class:`~outbox.errors.InvalidMessage` subclass with a
message that names the field, so a caller's bad input never becomes a row.
"""

from __future__ import annotations

import hashlib
import math
import re
from functools import lru_cache
from typing import Any

import email_validator
import orjson
from email_validator.rfc_constants import CASE_INSENSITIVE_MAILBOX_NAMES

from outbox.errors import (
    HeaderInjection,
    InvalidAddress,
    InvalidKey,
    InvalidParams,
    MissingParams,
)
from outbox.message.render import Template
from outbox.models import Priority

MAX_KEY_LENGTH = 255
_PRIORITIES = frozenset(p.value for p in Priority)
_JSON_OPTIONS = (
    orjson.OPT_SORT_KEYS
    | orjson.OPT_PASSTHROUGH_DATETIME
    | orjson.OPT_PASSTHROUGH_DATACLASS
    | orjson.OPT_PASSTHROUGH_SUBCLASS
)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_HEADER_BREAKERS = re.compile(r"[\r\n\x00]")
_ENCODED_WORD = re.compile(r"=\?[^?]*\?[bBqQ]\?[^?]*\?=")
# RFC 5322 dot-atom of ASCII atext: the common case, checked without the library.
_ASCII_LOCAL = re.compile(r"[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*")


def check_key(key: object) -> str:
    if not isinstance(key, str) or not key:
        raise InvalidKey("idempotency_key must be a non-empty string")
    if len(key) > MAX_KEY_LENGTH:
        raise InvalidKey(f"idempotency_key is longer than {MAX_KEY_LENGTH} characters")
    if _CONTROL.search(key) or not _is_encodable(key):
        raise InvalidKey("idempotency_key contains control characters or invalid Unicode")
    return key


def check_priority(priority: object) -> Priority:
    if isinstance(priority, str) and priority in _PRIORITIES:
        return Priority(priority)
    raise InvalidParams(f"priority must be 'high' or 'bulk', not {priority!r}")


def normalize_address(address: object) -> str:
    """The address as it will be stored and sent, or InvalidAddress.

    Syntax only (no DNS): domains are checked once per process through
    email-validator; internationalised addresses go through it whole.
    """
    if not isinstance(address, str):
        raise InvalidAddress("recipient must be a string")
    if _HEADER_BREAKERS.search(address):
        raise HeaderInjection("recipient contains CR, LF or NUL")
    local, at, domain = address.rpartition("@")
    if _ENCODED_WORD.search(local):
        # Legal atext, but a mail client shows it decoded: a display trick, not a mailbox.
        raise InvalidAddress("recipient's local part is an RFC 2047 encoded word")
    if at and len(address) <= 254 and len(local) <= 64 and _ASCII_LOCAL.fullmatch(local):
        if local.lower() in _ROLE_MAILBOXES:
            local = local.lower()  # as email-validator does: RFC 2142's names know no case
        return f"{local}@{_normalize_domain(domain)}"
    try:
        normalized = email_validator.validate_email(address, check_deliverability=False).normalized
    except email_validator.EmailNotValidError as exc:
        raise InvalidAddress(f"invalid recipient: {exc}") from None
    if len(normalized.rpartition("@")[0].encode("utf-8", "surrogatepass")) > 64:
        raise InvalidAddress(
            "recipient's local part is over 64 octets (RFC 5321 section 4.5.3.1.1)"
        )
    return normalized


_ROLE_MAILBOXES = frozenset(CASE_INSENSITIVE_MAILBOX_NAMES)  # postmaster, abuse, news…


@lru_cache(maxsize=4096)
def _normalize_domain(domain: str) -> str:
    try:
        return email_validator.validate_email(f"a@{domain}", check_deliverability=False).domain
    except email_validator.EmailNotValidError as exc:
        raise InvalidAddress(f"invalid recipient domain: {exc}") from None


def ascii_address(address: str) -> str | None:
    """The address with an IDNA domain, or None when the local part needs SMTPUTF8."""
    try:
        return email_validator.validate_email(address, check_deliverability=False).ascii_email
    except email_validator.EmailNotValidError:
        return None


def dump_params(params: object, *, max_bytes: int) -> str:
    """Params as canonical JSON text (sorted keys), or InvalidParams."""
    if params is None:
        params = {}
    if not isinstance(params, dict):
        raise InvalidParams("params must be a dict (a JSON object)")
    try:
        # orjson refuses non-string keys, lone surrogates and integers past
        # 64 bits; the pass-through options make it refuse dates and
        # dataclasses too, so params are plain JSON values and nothing else.
        data = orjson.dumps(params, option=_JSON_OPTIONS)
    except (TypeError, orjson.JSONEncodeError) as exc:
        raise InvalidParams(f"params are not JSON-serialisable: {exc}") from None
    # orjson writes NaN and Infinity as null: without a null there is none to find.
    if b"null" in data and _has_non_finite(params):
        raise InvalidParams("params contain NaN or Infinity, which JSON cannot hold")
    if b"\\u0000" in data:
        raise InvalidParams("params contain a NUL character, which Postgres cannot store")
    size = len(data)
    if size > max_bytes:
        raise InvalidParams(f"params are {size} bytes, over the limit of {max_bytes}")
    return data.decode("utf-8")


def check_params_for(template: Template, params: dict[str, Any]) -> None:
    missing = template.variables - params.keys()
    if missing:
        raise MissingParams(
            f"template {template.name!r} needs params: {', '.join(sorted(missing))}"
        )
    for name in template.subject_variables:
        if _has_header_breaker(params[name]):
            raise HeaderInjection(f"param {name!r} reaches the Subject and contains CR, LF or NUL")


def check_params_shape(template: Template, params: dict[str, Any]) -> None:
    """Params of the shape the template's example has, where it has one.

    A template that loops over ``items`` cannot render ``items=5``; found
    here, that is an InvalidParams at enqueue instead of a row that fails in
    the worker on every attempt. Scalars of any kind stand for each other.
    """
    for name, example in template.example.items():
        if name in params:
            _check_shape(example, params[name], (name,))


def content_hash(
    recipient: str,
    template: str,
    params_json: str,
    priority: str,
    fields: dict[str, Any] | None = None,
) -> str:
    """Identifies what an idempotency key stands for, to detect a reused key.

    ``fields`` are the per-message fields given (sender, reply-to, ...); they
    count only when present, so an email without them hashes as it did
    before they existed and a re-enqueue of a stored row still matches.
    """
    blob = "\x00".join((recipient, template, priority, params_json)).encode("utf-8")
    if fields:
        blob += b"\x00" + orjson.dumps(fields, option=orjson.OPT_SORT_KEYS)
    return hashlib.sha256(blob).hexdigest()[:32]


def _kind(value: Any) -> str:
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list | tuple):
        return "a list"
    return "a plain value"


def _check_shape(example: Any, value: Any, path: tuple[str | int, ...]) -> None:
    # The path is formatted only for an error: every email's params pass here.
    if example is None:
        return
    if isinstance(example, dict):
        if not isinstance(value, dict):
            raise _shape_error(path, "an object", value)
        for key, inner in example.items():
            if key not in value:
                raise InvalidParams(
                    f"{_where(path)} lacks {key!r}, which the template's example has"
                )
            _check_shape(inner, value[key], (*path, key))
    elif isinstance(example, list | tuple):
        if not isinstance(value, list | tuple):
            raise _shape_error(path, "a list", value)
        if example:
            for index, item in enumerate(value):
                _check_shape(example[0], item, (*path, index))
    elif isinstance(value, dict | list | tuple):
        raise _shape_error(path, "a plain value", value)


def _where(path: tuple[str | int, ...]) -> str:
    return "params" + "".join(f"[{step!r}]" for step in path)


def _shape_error(path: tuple[str | int, ...], expected: str, value: Any) -> InvalidParams:
    return InvalidParams(
        f"{_where(path)} must be {expected}, as in the template's example, not {_kind(value)}"
    )


def _has_header_breaker(value: Any) -> bool:
    if isinstance(value, str):
        return bool(_HEADER_BREAKERS.search(value))
    if isinstance(value, dict):
        return any(_has_header_breaker(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_header_breaker(v) for v in value)
    return False


def _has_non_finite(value: Any) -> bool:
    # Iterative and type-exact: this runs for every row of a newsletter.
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is float:
            if not math.isfinite(item):
                return True
        elif kind is dict:
            stack.extend(item.values())
        elif kind is list or kind is tuple:
            stack.extend(item)
        elif isinstance(item, float) and not math.isfinite(item):  # a float subclass
            return True
    return False


def _is_encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True
