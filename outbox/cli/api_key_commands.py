"""``outbox api-keys``: the keys of the HTTP API (``outbox web``, /v1/)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from outbox.cli.database import connect
from outbox.cli.output import Printer, Refused, Result, Said
from outbox.config import Settings
from outbox.db.store import api_key_rows, connections
from outbox.web import api_keys as keys
from outbox.web import owners


@dataclass(frozen=True, slots=True)
class ApiKeys(Result):
    """``api-keys list``: every key, live or revoked, by its shown prefix."""

    keys: list[dict[str, Any]]

    def text(self) -> str:
        return "\n".join(_key_line(key) for key in self.keys)


def _key_line(key: dict[str, Any]) -> str:
    state = f"revoked {key['revoked_at']:%Y-%m-%d %H:%M}" if key["revoked_at"] else "live"
    owner = key["owner"] or owners.DEFAULT
    if key["operator"]:
        owner += " (operator)"
    return (
        f"{key['created_at']:%Y-%m-%d %H:%M}  {key['prefix']}…  "
        f"{','.join(key['scopes']):<10}  {state:<22}  {key['name']}  owner {owner}"
    )


def api_keys(settings: Settings, args: argparse.Namespace, out: Printer) -> Result:
    if args.action != "list" and not args.name:
        return Refused(f"outbox api-keys {args.action} needs a NAME", code=2)
    with connect(settings) as conn:
        if args.action == "create":
            token = keys.new_token()
            scopes = keys.checked_scopes(args.scope or ["send"])
            try:
                owner = owners.checked_owner(args.owner or args.name)
            except ValueError as exc:
                return Refused(str(exc), code=2)
            api_key_rows.create_api_key(
                conn,
                name=args.name,
                token_hash=keys.token_hash(token),
                prefix=keys.shown_prefix(token),
                scopes=scopes,
                owner=owner,
                operator=args.operator,
            )
            connections.commit(conn)
            reach = "every owner's emails" if args.operator else "its owner's emails"
            out.note(
                f"API key {args.name!r} ({', '.join(scopes)}) of owner"
                f" {owner or owners.DEFAULT!r}, reaching {reach}:"
                " store it now, it is not shown again"
            )
            # The one time the key is shown: only its hash is kept.
            return Said(token)
        if args.action == "revoke":
            revoked = api_key_rows.revoke_api_key(conn, args.name)
            connections.commit(conn)
            return Said("revoked") if revoked else Said(f"no live API key named {args.name!r}", 1)
        return ApiKeys(api_key_rows.list_api_keys(conn))
