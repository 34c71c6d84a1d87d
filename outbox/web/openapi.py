"""The HTTP API described in OpenAPI 3.1, served at ``/v1/openapi.json`` (pure)."""

from __future__ import annotations

from typing import Any

from outbox.web.email_request import CONFLICT, FIELDS, INVALID, MAX_BATCH, PROBLEM, TOO_LATE

_REF = "#/components/schemas/"


def _problem(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {PROBLEM: {"schema": {"$ref": _REF + "Problem"}}},
    }


def _ok(description: str, schema: str, headers: dict[str, Any] | None = None) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": _REF + schema}}},
    }
    if headers:
        answer["headers"] = headers
    return answer


_COMMON = {
    "401": _problem("no key, or a wrong or revoked one"),
    "403": _problem("the key lacks the route's scope"),
    "429": {
        **_problem("over the key's rate"),
        "headers": {"Retry-After": {"schema": {"type": "integer", "minimum": 1}}},
    },
    "503": _problem("the database is unavailable: try again"),
}
_WRITE = {
    "400": _problem("the body is not JSON"),
    "409": _problem(f"a key used before for other content ({CONFLICT})"),
    "422": _problem(f"invalid: every bad field is named ({INVALID}); nothing was written"),
}

_TEXT = {"type": ["string", "null"]}
_ADDRESSES = {
    "oneOf": [{"type": "string"}, {"type": "array", "items": {"type": "string"}}, {"type": "null"}]
}
_EMAIL_FIELDS: dict[str, Any] = {
    "to": {"type": "string", "description": "the recipient's address"},
    "template": {
        **_TEXT,
        "description": "a template of OUTBOX_TEMPLATES; absent or null: the email's own "
        "subject, text and/or html",
    },
    "params": {"type": ["object", "null"], "description": "the template's variables"},
    "priority": {
        "enum": ["high", "bulk", None],
        "description": "high: login codes, resets; default: the template's, else bulk",
    },
    "sender": {**_TEXT, "description": "the From, at one of OUTBOX_SENDER_DOMAINS"},
    "reply_to": {**_ADDRESSES, "description": "one address or up to 10"},
    "subject": {**_TEXT, "description": "without a template: the subject"},
    "text": {**_TEXT, "description": "without a template: the plain text body"},
    "html": {**_TEXT, "description": "without a template: the HTML body (text derived)"},
    "headers": {
        "type": ["object", "null"],
        "additionalProperties": {"type": "string"},
        "description": "X-* and a few standard headers (List-Id, References, In-Reply-To…)",
    },
    "tags": {"type": ["array", "null"], "items": {"type": "string"}},
    "metadata": {
        "type": ["object", "null"],
        "additionalProperties": {"type": ["string", "number", "boolean"]},
    },
    "cc": {**_ADDRESSES, "description": "more recipients, 10 in all with to and bcc"},
    "bcc": {**_ADDRESSES, "description": "more recipients, in no header"},
    "send_at": {
        "type": ["string", "null"],
        "format": "date-time",
        "description": "RFC 3339 with a time zone: the email waits until then",
    },
    "locale": {**_TEXT, "description": "de-AT: the template's de-AT/, else de/, else default"},
    "attachments": {
        "type": ["array", "null"],
        "items": {
            "type": "object",
            "required": ["filename", "content"],
            "properties": {
                "filename": {"type": "string"},
                "content": {"type": "string", "contentEncoding": "base64"},
                "content_type": {"type": "string"},
            },
            "additionalProperties": False,
        },
        "description": "files by content, stored once per distinct file",
    },
}


_EVENTS_ROUTE: dict[str, Any] = {
    "operationId": "listEvents",
    "summary": "What became of the key's owner's emails, in order (outbox.read_events)",
    "parameters": [
        {
            "name": "after",
            "in": "query",
            "required": False,
            "schema": {"type": "string", "pattern": "^[0-9]{1,20}[.][0-9]{1,19}$"},
            "description": "the next_cursor of the page before; none: from the first event",
        },
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000, "default": 100},
        },
    ],
    "responses": {
        "200": _ok("the events after the cursor, and the cursor to pass next", "Events"),
        "422": _problem("the cursor or the limit is not one the feed takes"),
        **_COMMON,
    },
}
_EVENTS_PAGE: dict[str, Any] = {
    "type": "object",
    "required": ["events", "next_cursor"],
    "properties": {
        "events": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["id", "cursor", "type", "timestamp", "data"],
                "properties": {
                    "id": {"type": "string", "description": "evt_…, the webhook-id too"},
                    "cursor": {"type": "string"},
                    "type": {"type": "string"},
                    "timestamp": {"type": "string", "format": "date-time"},
                    "data": {"type": "object"},
                },
            },
        },
        "next_cursor": {"type": ["string", "null"]},
    },
}


def document() -> dict[str, Any]:
    # A field intake takes beyond these is accepted too, as enqueue validates it.
    fields = {**_EMAIL_FIELDS, **{name: {} for name in FIELDS if name not in _EMAIL_FIELDS}}
    accepted = {
        "type": "object",
        "required": ["id", "message_id", "idempotency_key", "status"],
        "properties": {
            "id": {"type": "integer"},
            "message_id": {"type": "string"},
            "idempotency_key": {"type": "string"},
            "status": {
                "enum": ["accepted", "suppressed"],
                "description": "as accepted; suppressed: the recipient is on the suppression "
                "list and the email is an audit row that is never sent",
            },
        },
    }
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Outbox HTTP API",
            "version": "1",
            "description": "Enqueue transactional email from any language; each business "
            "event is one email, identified by its idempotency key. A key reaches only its "
            "owner's emails (another owner's answers 404) and its idempotency keys are its "
            "owner's alone; an operator key reaches every email.",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "paths": {
            "/v1/emails": {
                "post": {
                    "operationId": "enqueueEmail",
                    "summary": "Enqueue one email",
                    "parameters": [
                        {
                            "name": "Idempotency-Key",
                            "in": "header",
                            "required": True,
                            "description": "one key per business event (1 to 255 characters)",
                            "schema": {"type": "string", "minLength": 1, "maxLength": 255},
                        }
                    ],
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": _REF + "EmailRequest"}}
                        },
                    },
                    "responses": {
                        "202": _ok("enqueued", "Accepted"),
                        "200": _ok("this key and content were accepted before", "Accepted"),
                        **_WRITE,
                        **_COMMON,
                    },
                },
                "get": {
                    "operationId": "findEmail",
                    "summary": "An email by its idempotency key",
                    "parameters": [
                        {
                            "name": "idempotency_key",
                            "in": "query",
                            "required": True,
                            "schema": {"type": "string", "minLength": 1},
                        }
                    ],
                    "responses": {
                        "200": _ok("the email", "Email"),
                        "404": _problem("no email of this key's owner with that key"),
                        "422": _problem("the key is missing or no key enqueue would take"),
                        **_COMMON,
                    },
                },
            },
            "/v1/emails/batch": {
                "post": {
                    "operationId": "enqueueEmails",
                    "summary": f"Enqueue up to {MAX_BATCH} emails, all or none",
                    "requestBody": {
                        "required": True,
                        "content": {
                            "application/json": {"schema": {"$ref": _REF + "BatchRequest"}}
                        },
                    },
                    "responses": {
                        "202": _ok("enqueued (some were new)", "BatchAccepted"),
                        "200": _ok("every one was accepted before", "BatchAccepted"),
                        **_WRITE,
                        **_COMMON,
                    },
                }
            },
            "/v1/emails/{id}": {
                "get": {
                    "operationId": "getEmail",
                    "summary": "An email's status, attempts and events",
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer"},
                        }
                    ],
                    "responses": {
                        "200": _ok("the email", "Email"),
                        "404": _problem("no email of this key's owner with that id"),
                        **_COMMON,
                    },
                },
                "delete": {
                    "operationId": "cancelEmail",
                    "summary": "Cancel an email no worker has taken yet (send scope)",
                    "parameters": [
                        {
                            "name": "id",
                            "in": "path",
                            "required": True,
                            "schema": {"type": "integer"},
                        }
                    ],
                    "requestBody": {
                        "required": False,
                        "content": {
                            "application/json": {
                                "schema": {
                                    "type": "object",
                                    "properties": {"reason": {"type": "string"}},
                                    "additionalProperties": False,
                                }
                            }
                        },
                    },
                    "responses": {
                        "200": _ok("cancelled, now or before", "Cancelled"),
                        "404": _problem("no email of this key's owner with that id"),
                        "409": _problem(f"a worker has taken it already ({TOO_LATE})"),
                        "422": _problem("the body is not {reason}"),
                        **_COMMON,
                    },
                },
            },
            "/v1/events": {"get": _EVENTS_ROUTE},
        },
        "components": {
            "securitySchemes": {
                "bearer": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a key from `outbox api-keys create NAME`",
                }
            },
            "schemas": {
                "EmailRequest": {
                    "type": "object",
                    "required": ["to"],
                    "properties": fields,
                    "additionalProperties": False,
                },
                "BatchEmail": {
                    "type": "object",
                    "required": ["idempotency_key", "to"],
                    "properties": {
                        "idempotency_key": {"type": "string", "minLength": 1, "maxLength": 255},
                        **fields,
                    },
                    "additionalProperties": False,
                },
                "BatchRequest": {
                    "type": "object",
                    "required": ["emails"],
                    "properties": {
                        "emails": {
                            "type": "array",
                            "minItems": 1,
                            "maxItems": MAX_BATCH,
                            "items": {"$ref": _REF + "BatchEmail"},
                        }
                    },
                    "additionalProperties": False,
                },
                "Accepted": accepted,
                "Events": _EVENTS_PAGE,
                "Cancelled": {
                    "type": "object",
                    "required": ["id", "idempotency_key", "status", "cancelled"],
                    "properties": {
                        "id": {"type": "integer"},
                        "idempotency_key": {"type": "string"},
                        "status": {"const": "cancelled"},
                        "cancelled": {
                            "type": "boolean",
                            "description": "false: it was cancelled before",
                        },
                    },
                },
                "BatchAccepted": {
                    "type": "object",
                    "required": ["emails"],
                    "properties": {
                        "emails": {
                            "type": "array",
                            "items": {
                                "allOf": [
                                    {"$ref": _REF + "Accepted"},
                                    {
                                        "type": "object",
                                        "required": ["created"],
                                        "properties": {"created": {"type": "boolean"}},
                                    },
                                ]
                            },
                        }
                    },
                },
                "Email": {
                    "type": "object",
                    "required": [
                        "id",
                        "idempotency_key",
                        "message_id",
                        "recipient",
                        "template",
                        "priority",
                        "status",
                        "attempts",
                        "created_at",
                        "events",
                    ],
                    "properties": {
                        "id": {"type": "integer"},
                        "idempotency_key": {"type": "string"},
                        "message_id": {"type": "string"},
                        "recipient": {
                            "type": "string",
                            "description": "in clear for a key with the read scope, else a tag "
                            "(a keyed hash and the domain)",
                        },
                        "template": {"type": "string"},
                        "priority": {"enum": ["high", "bulk"]},
                        "status": {"type": "string"},
                        "status_reason": {"type": ["string", "null"]},
                        "attempts": {"type": "integer"},
                        "created_at": {"type": "string", "format": "date-time"},
                        "next_attempt_at": {"type": ["string", "null"]},
                        "sent_at": {"type": ["string", "null"]},
                        "failed_at": {"type": ["string", "null"]},
                        "events": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "from": {"type": ["string", "null"]},
                                    "to": {"type": "string"},
                                    "reason": {"type": ["string", "null"]},
                                    "actor": {"type": ["string", "null"]},
                                    "at": {"type": "string"},
                                },
                            },
                        },
                    },
                },
                "Problem": {
                    "type": "object",
                    "description": "RFC 9457 problem details",
                    "required": ["type", "title", "status"],
                    "properties": {
                        "type": {"type": "string"},
                        "title": {"type": "string"},
                        "status": {"type": "integer"},
                        "detail": {"type": "string"},
                        "errors": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "required": ["detail"],
                                "properties": {
                                    "pointer": {"type": "string"},
                                    "header": {"type": "string"},
                                    "detail": {"type": "string"},
                                },
                            },
                        },
                    },
                },
            },
        },
    }
