"""The password in a connection setting, found by pattern, not by a parse (pure).

A URL whose password holds an unescaped ``/``, ``#``, ``?`` or ``@``, or
whose scheme has a typo (``smtp//``, ``smtp:/``), does not parse as its
author meant: ``urlsplit`` finds no password in it, or the wrong one. So the
credentials are taken by pattern: whatever stands between the scheme and the
last ``@``, after the user name's ``:``. :func:`masked` prints a URL only when
it reads unambiguously, and ``****`` otherwise; :func:`secrets` tells the log
redactor every string that may be the password. libpq's ``key=value`` form
and a ``?password=`` parameter are covered the same way, as are libpq's
several hosts (``postgresql://u:pw@db1:5432,db2:5432/app``).
"""

from __future__ import annotations

import re
from urllib.parse import SplitResult, unquote, urlsplit, urlunsplit

MASK = "****"
# What a scheme looks like, typos included: smtp://, smtp:/, smtp//, smtp:
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*(?::/*|/+)")
_STRICT_SCHEME = re.compile(r"[a-z][a-z0-9+.-]*")
# password=… in libpq's key=value form or in a query string; quoted values may hold spaces.
_PASSWORD_PARAMETER = re.compile(r"(?i)(\bpassword\s*=\s*)('(?:\\.|[^'\\])*'|[^\s&;]*)")
_DELIMITERS = re.compile(r"[/?#@]")


def masked(value: str) -> str:
    """``value`` fit to print: ``smtp://user:****@host:587``, or ``****`` when it is
    no URL that reads one way only (it may be a password pasted in the wrong place)."""
    if not value:
        return ""
    if _is_conninfo(value):
        return _PASSWORD_PARAMETER.sub(rf"\g<1>{MASK}", value)
    try:
        parts = urlsplit(value)
        readable = _reads_one_way(value, parts)
    except ValueError:
        readable = False
    if not readable:
        return MASK
    query = _PASSWORD_PARAMETER.sub(rf"\g<1>{MASK}", parts.query)
    userinfo, _, host = parts.netloc.rpartition("@")
    if ":" in userinfo:
        host = f"{userinfo.partition(':')[0]}:{MASK}@{host}"
    elif userinfo:
        host = f"{userinfo}@{host}"
    return urlunsplit(parts._replace(netloc=host, query=query))


def secrets(value: str) -> list[str]:
    """Every string in ``value`` that may be its password, escaped and not."""
    if not value:
        return []
    found = [m.group(2).strip("'") for m in _PASSWORD_PARAMETER.finditer(value)]
    unreadable = masked(value) == MASK
    if unreadable:
        found.append(value)  # all of it may be the secret
    if not _is_conninfo(value) and "@" in value:
        userinfo = value[: value.rfind("@")]
        scheme = _SCHEME.match(userinfo)
        if scheme:
            userinfo = userinfo[scheme.end() :]
        # Without a ":" it is a user name, unless the scheme that would say so is garbled.
        password = userinfo.partition(":")[2] if ":" in userinfo or not unreadable else userinfo
        # A parser may cut the password at a delimiter and show a piece of it.
        found += [password, *_DELIMITERS.split(password)]
    return [s for v in found if v for s in {v, unquote(v)}]


def _is_conninfo(value: str) -> bool:
    """libpq's ``host=db password=…`` form."""
    return "://" not in value and "=" in value and "@" not in value


def _reads_one_way(value: str, parts: SplitResult) -> bool:
    if not _STRICT_SCHEME.fullmatch(parts.scheme) or not value.startswith(f"{parts.scheme}://"):
        return False
    if parts.fragment or "#" in value:
        return False
    if value.count("@") > 1 or "@" in parts.path + parts.query:
        return False
    # libpq takes several hosts, comma-separated (db1:5432,db2:5432): each must read.
    for host in parts.netloc.rpartition("@")[2].split(","):
        one = urlsplit(f"//{host}")
        if not one.hostname:
            return False
        _ = one.port  # ValueError for a port that is not a number
    return True
