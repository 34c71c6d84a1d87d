"""Amazon SES v2 ``SendEmail`` with the raw message, through boto3's ``sesv2`` client.

What this relies on (Amazon SES API v2 reference, "SendEmail", and the SES
developer guide, "Amazon SES header fields"):

- ``POST /v2/email/outbound-emails`` (botocore builds and signs it, SigV4)
  with ``Content={"Raw": {"Data": bytes}}``: the message goes as built, MIME,
  attachments and all. ``Destination.ToAddresses`` names the recipient
  explicitly; ``FeedbackForwardingEmailAddress`` is where SES mails bounces
  and complaints (our return path: the VERP address when
  ``OUTBOX_BOUNCE_DOMAIN`` is set, which must then be a verified identity);
  ``ConfigurationSetName`` selects event publishing.
- 200 answers ``{"MessageId": "…"}``, the id SES's notifications and events
  name (stored as ``provider_message_id``).
- SES **replaces** a ``Message-ID`` header with its own, and ``Date`` with the
  time it accepted the message. Our Message-ID therefore travels in
  ``X-Outbox-Message-ID``, which SES leaves alone; a DKIM signature of ours
  that covers Message-ID breaks, and SES's own (Easy DKIM) signs instead.
- Errors: 429 ``TooManyRequestsException``; 400 ``MessageRejected``,
  ``BadRequestException``, ``LimitExceededException``,
  ``AccountSuspendedException``, ``SendingPausedException``,
  ``MailFromDomainNotVerifiedException``; 404 ``NotFoundException`` (an
  unknown configuration set). Only the first two of the 400s judge the
  message; the others are about the account and are retried.
- ``SendEmail`` takes no idempotency token: a response lost after the request
  left is an uncertain delivery. botocore's own retries are switched off, as
  the row owns retries.

Credentials come from the standard AWS chain (``AWS_ACCESS_KEY_ID``/
``AWS_SECRET_ACCESS_KEY``, ``AWS_PROFILE``, an instance or task role).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, NoRegionError
from botocore.exceptions import ConnectionError as BotoConnectionError
from botocore.parsers import ResponseParserError

from outbox.errors import ConfigError
from outbox.models import HttpReply, Reply, Stage
from outbox.transports import http
from outbox.transports.base import OutgoingMessage, provider_tags
from outbox.transports.parts import ORIGINAL_MESSAGE_ID

if TYPE_CHECKING:
    from mypy_boto3_sesv2.client import SESV2Client
    from mypy_boto3_sesv2.type_defs import SendEmailRequestTypeDef

# Error codes about the account or its configuration, not this message.
_ACCOUNT_ERRORS = frozenset(
    {
        "AccountSuspendedException",
        "SendingPausedException",
        "MailFromDomainNotVerifiedException",
        "LimitExceededException",
        "NotFoundException",
        "TooManyRequestsException",
        "Throttling",
        "ThrottlingException",
    }
)


@dataclass(frozen=True)
class SesConfig:
    region: str = ""  # empty: AWS_REGION, AWS_DEFAULT_REGION or the profile's
    endpoint_url: str = ""  # empty: the region's SES endpoint
    configuration_set: str = ""
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    max_connections: int = 0  # 0: botocore's default pool (10)


def request(message: OutgoingMessage, *, configuration_set: str = "") -> SendEmailRequestTypeDef:
    """The ``send_email`` arguments for one built message."""
    # Prepended: a header above the others changes no DKIM-signed header.
    data = f"{ORIGINAL_MESSAGE_ID}: {message.message_id}\r\n".encode("ascii") + message.data
    params: SendEmailRequestTypeDef = {
        "Content": {"Raw": {"Data": data}},
        "Destination": {
            "ToAddresses": [message.recipient],
            **({"CcAddresses": list(message.cc)} if message.cc else {}),
            **({"BccAddresses": list(message.bcc)} if message.bcc else {}),
        },
        "FeedbackForwardingEmailAddress": message.envelope_from,
    }
    if configuration_set:
        params["ConfigurationSetName"] = configuration_set
    tags = provider_tags(message)
    if tags:
        params["EmailTags"] = [{"Name": name, "Value": value} for name, value in tags]
    return params


def parse_error(response: Mapping[str, Any]) -> HttpReply:
    """A botocore ``ClientError.response``: ``Error.Code``, ``Error.Message``, metadata."""
    error = response.get("Error") or {}
    metadata = response.get("ResponseMetadata") or {}
    code = str(error.get("Code") or "")
    text = str(error.get("Message") or "").strip()
    headers = metadata.get("HTTPHeaders") or {}
    status = metadata.get("HTTPStatusCode")
    return HttpReply(
        Stage.RESPONSE,
        status if isinstance(status, int) else None,
        f"{code}: {text}" if code else text,
        error=None if isinstance(status, int) else "no status in the error response",
        retry_after=http.retry_after(headers.get("retry-after")),
        transient=code in _ACCOUNT_ERRORS,
    )


class SesTransport:
    def __init__(self, config: SesConfig) -> None:
        self.config = config
        options = Config(
            connect_timeout=config.connect_timeout,
            read_timeout=config.read_timeout,
            retries={"total_max_attempts": 1},  # no retries inside a send
        )
        if config.max_connections:
            options = options.merge(Config(max_pool_connections=config.max_connections))
        # A session of our own: boto3's default session is not thread-safe; clients are.
        session = boto3.session.Session(region_name=config.region or None)
        try:
            self._client: SESV2Client = session.client(
                "sesv2", endpoint_url=config.endpoint_url or None, config=options
            )
        except NoRegionError:
            raise ConfigError("SES needs a region: set OUTBOX_SES_REGION (or AWS_REGION)") from None

    def send(self, message: OutgoingMessage) -> Reply:
        params = request(message, configuration_set=self.config.configuration_set)
        if message.before_commit is not None:
            message.before_commit()  # the request leaves next: see OutgoingMessage
        try:
            response = self._client.send_email(**params)
        except ClientError as exc:
            return parse_error(exc.response)
        except BotoConnectionError as exc:  # refused, DNS, connect timeout, TLS, proxy
            return HttpReply(Stage.CONNECT, error=f"{type(exc).__name__}: {exc}")
        except (HTTPClientError, ResponseParserError) as exc:
            # A read timeout, a connection closed without (a readable) response.
            return HttpReply(Stage.RESPONSE, error=f"{type(exc).__name__}: {exc}")
        except BotoCoreError as exc:
            # Raised before anything left: credentials, parameters, signing.
            return HttpReply(Stage.REQUEST, error=f"{type(exc).__name__}: {exc}")
        return HttpReply(
            Stage.RESPONSE,
            response["ResponseMetadata"]["HTTPStatusCode"],
            "OK",
            provider_message_id=response.get("MessageId"),
        )

    def close(self) -> None:
        self._client.close()
