"""DKIM signatures (RFC 6376), relaxed/relaxed, rsa-sha256 or ed25519-sha256 (RFC 8463).

dkimpy does the DKIM work: header selection, relaxed canonicalisation of
headers and body, the signature header and its folding. The private-key
operation alone runs in OpenSSL (``cryptography``): dkimpy's pure-Python RSA
costs about 17 ms per message on the send path and holds the GIL; OpenSSL
takes about a millisecond and releases it. dkimpy verifies the result in
the tests.

Signed: the headers receivers and RFC 8058 check. Each is listed once more
than it occurs ("oversigning", RFC 6376 section 8.15), so a relay cannot add
a second From, Subject or List-Unsubscribe without breaking the signature.
"""

from __future__ import annotations

import base64
import hashlib
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import dkim as dkimpy  # type: ignore[import-untyped]
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ed25519, padding, rsa, utils
from dkim.canonicalization import (  # type: ignore[import-untyped]
    CanonicalizationPolicy,
    correct_empty_body,
    strip_trailing_lines,
)

from outbox.config import Settings
from outbox.errors import ConfigError

SIGNED_HEADERS = (
    b"from",
    b"to",
    b"cc",
    b"reply-to",
    b"subject",
    b"date",
    b"message-id",
    b"mime-version",
    b"content-type",
    b"content-transfer-encoding",
    b"auto-submitted",
    b"list-unsubscribe",
    b"list-unsubscribe-post",
)
_DOMAIN = re.compile(r"[a-z0-9-]+(?:\.[a-z0-9-]+)+")
_SELECTOR = re.compile(r"[A-Za-z0-9_-]+(?:\.[A-Za-z0-9_-]+)*")
_RELAXED = CanonicalizationPolicy.from_c_value(b"relaxed/relaxed")


@dataclass(frozen=True)
class Signer:
    selector: str
    domain: str
    key: rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey

    @classmethod
    def from_pem(
        cls, selector: str, domain: str, pem: bytes, *, setting: str = "OUTBOX_DKIM_PRIVATE_KEY"
    ) -> Signer:
        try:
            key = serialization.load_pem_private_key(pem, password=None)
        except (ValueError, TypeError) as exc:
            # cryptography's message names the problem, never the key's bytes.
            raise ConfigError(
                f"{setting} is not an unencrypted PEM key ({type(exc).__name__})"
            ) from None
        if not isinstance(key, rsa.RSAPrivateKey | ed25519.Ed25519PrivateKey):
            raise ConfigError(f"{setting} must be an RSA or Ed25519 key")
        if isinstance(key, rsa.RSAPrivateKey) and key.key_size < 1024:
            raise ConfigError(f"{setting}: RSA keys under 1024 bits do not verify")
        return cls(selector, domain.lower(), key)

    @classmethod
    def from_settings(cls, settings: Settings) -> Signer | None:
        """The configured signer, or None when DKIM is not configured."""
        values = (settings.dkim_selector, settings.dkim_domain, settings.dkim_private_key)
        if not any(values):
            return None
        if not all(values):
            raise ConfigError(
                "DKIM needs OUTBOX_DKIM_SELECTOR, OUTBOX_DKIM_DOMAIN and OUTBOX_DKIM_PRIVATE_KEY"
            )
        return cls.from_pem(settings.dkim_selector, settings.dkim_domain, _pem(settings))

    @property
    def algorithm(self) -> bytes:
        return (
            b"ed25519-sha256" if isinstance(self.key, ed25519.Ed25519PrivateKey) else b"rsa-sha256"
        )

    def sign(self, message: bytes, *, now: float | None = None) -> bytes:
        """``message`` (CRLF line ends) with a DKIM-Signature header in front."""
        head, _, body = message.partition(b"\r\n\r\n")
        parsed = dkimpy.rfc822_parse(head + b"\r\n\r\n")[0]
        headers = _RELAXED.canonicalize_headers(parsed)
        present = [name.lower() for name, _ in parsed]
        signed = [n for n in SIGNED_HEADERS for _ in range(present.count(n) + 1)]
        body_hash = hashlib.sha256(relaxed_body(body)).digest()
        fields = [
            (b"v", b"1"),
            (b"a", self.algorithm),
            (b"c", b"relaxed/relaxed"),
            (b"d", self.domain.encode("ascii")),
            (b"s", self.selector.encode("ascii")),
            (b"t", str(int(time.time() if now is None else now)).encode()),
            (b"h", b" : ".join(signed)),  # spaces: folding never splits a name
            (b"bh", base64.b64encode(body_hash)),
        ]
        unsigned = b"; ".join(b"=".join(f) for f in fields) + b"; b="
        hasher = hashlib.sha256()
        dkimpy.hash_headers(
            hasher,
            _RELAXED,
            headers,
            signed,
            (b"DKIM-Signature", b" " + dkimpy.fold(unsigned, namelen=15)),
            {},
        )
        signature = base64.b64encode(self._sign_digest(hasher.digest()))
        value = dkimpy.fold(unsigned + signature, namelen=15)
        return b"DKIM-Signature: " + bytes(value) + b"\r\n" + message

    def _sign_digest(self, digest: bytes) -> bytes:
        if isinstance(self.key, ed25519.Ed25519PrivateKey):
            return self.key.sign(digest)  # RFC 8463: Ed25519 over the SHA-256 hash
        return self.key.sign(digest, padding.PKCS1v15(), utils.Prehashed(hashes.SHA256()))


class Signers:
    """The DKIM key of each sending domain, so a message is signed by its From's domain.

    DMARC passes when the signing domain aligns with the From domain: equal,
    or (relaxed alignment) one is a subdomain of the other's organisational
    domain. A From domain without a key of its own takes the nearest parent
    domain's key, else the key of ``OUTBOX_DKIM_DOMAIN``.
    """

    def __init__(self, by_domain: Mapping[str, Signer], default: Signer | None) -> None:
        self.by_domain = dict(by_domain)
        self.default = default

    @classmethod
    def from_settings(cls, settings: Settings) -> Signers:
        default = Signer.from_settings(settings)
        by_domain = {default.domain: default} if default else {}
        for domain, (selector, path) in parse_dkim_keys(settings.dkim_keys).items():
            setting = f"OUTBOX_DKIM_KEYS ({domain})"
            try:
                pem = Path(path).read_bytes()
            except OSError as exc:
                raise ConfigError(
                    f"{setting} names a file that cannot be read ({exc.strerror})"
                ) from None
            by_domain[domain] = Signer.from_pem(selector, domain, pem, setting=setting)
        return cls(by_domain, default)

    def __bool__(self) -> bool:
        return bool(self.by_domain)

    def for_domain(self, domain: str) -> Signer | None:
        """The key for mail From ``domain``: its own, its nearest parent's, else the default."""
        labels = domain.lower().rstrip(".").split(".")
        for start in range(len(labels) - 1):
            found = self.by_domain.get(".".join(labels[start:]))
            if found is not None:
                return found
        return self.default


def parse_dkim_keys(text: str) -> dict[str, tuple[str, str]]:
    """``OUTBOX_DKIM_KEYS``: ``domain=selector:/path/to/key.pem`` entries, comma-separated.

    Keys are named by file only: a PEM has line breaks and would not survive a
    list in one variable, and a path in ``outbox config`` shows no secret.
    """
    found: dict[str, tuple[str, str]] = {}
    for entry in text.split(","):
        if not entry.strip():
            continue
        domain, eq, rest = entry.partition("=")
        selector, colon, path = rest.partition(":")
        domain, selector, path = domain.strip().lower(), selector.strip(), path.strip()
        if not (eq and colon and domain and selector and path):
            raise ConfigError(
                "OUTBOX_DKIM_KEYS entries are domain=selector:/path/to/key.pem, "
                f"not {entry.strip()[:40]!r}"
            )
        if not _DOMAIN.fullmatch(domain) or not _SELECTOR.fullmatch(selector):
            raise ConfigError(
                f"OUTBOX_DKIM_KEYS: {domain!r} or its selector {selector!r} is not an ASCII name"
            )
        if domain in found:
            raise ConfigError(f"OUTBOX_DKIM_KEYS names {domain!r} twice")
        found[domain] = (selector, path)
    return found


def relaxed_body(body: bytes) -> bytes:
    """RFC 6376 section 3.4.4, as dkimpy computes it, without its regexes when they change nothing.

    dkimpy runs two substitutions over the whole body (half of the signing
    time for a newsletter); base64, quoted-printable and most text have no
    tab, no run of spaces and no space before a line end, so only the
    trailing empty lines need handling.
    """
    if b"\t" in body or b"  " in body or b" \r\n" in body:
        return bytes(_RELAXED.canonicalize_body(body))
    return bytes(correct_empty_body(strip_trailing_lines(body)))


def public_record(signer: Signer) -> str:
    """The TXT record to publish at ``<selector>._domainkey.<domain>``."""
    public = signer.key.public_key()
    if isinstance(public, ed25519.Ed25519PublicKey):
        raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
        return f"v=DKIM1; k=ed25519; p={base64.b64encode(raw).decode()}"
    der = public.public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    return f"v=DKIM1; k=rsa; p={base64.b64encode(der).decode()}"


def _pem(settings: Settings) -> bytes:
    """The PEM the setting holds or names. No error message ever shows the value:
    a misquoted key must not end up in a log, a row or a trace."""
    value = settings.dkim_private_key.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
        value = value[1:-1].strip()  # quoted in an env file: the quotes are not the key
    if value.startswith("-----BEGIN"):
        # Hosts that cannot hold a multi-line variable get "\n" escapes.
        return value.replace("\\n", "\n").encode("ascii", "replace")
    if "\n" in value or len(value) > 1024 or _looks_like_key_body(value):
        raise ConfigError(
            "OUTBOX_DKIM_PRIVATE_KEY is neither a PEM key (starting with -----BEGIN) nor a "
            "file path; give the whole PEM, with its BEGIN and END lines, or its file's path"
        )
    try:
        return Path(value).read_bytes()
    except OSError as exc:
        raise ConfigError(
            f"OUTBOX_DKIM_PRIVATE_KEY names a file that cannot be read ({exc.strerror})"
        ) from None


def _looks_like_key_body(value: str) -> bool:
    """Long base64 that is no absolute or relative path: the key without its PEM lines."""
    return (
        len(value) > 100
        and not value.startswith(("/", ".", "~"))
        and all(c.isalnum() or c in "+/=" for c in value)
    )
