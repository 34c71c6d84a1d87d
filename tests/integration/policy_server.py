"""An HTTPS server for MTA-STS policies on a loopback address of its own, port 443.

Senders fetch ``https://mta-sts.<domain>/.well-known/mta-sts.txt`` on port
443, so the test serves there too: each server takes a random 127.x.y.z
address (the whole 127/8 is loopback), which the test zone's ``mta-sts`` A
record names. Binding port 443 needs root, as the test machines run.
"""

from __future__ import annotations

import random
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trustme


class PolicyServer:
    """Serves ``body`` with ``content_type`` and ``status`` at any path, over TLS for ``names``."""

    def __init__(
        self,
        ca: trustme.CA,
        names: list[str],
        body: str,
        *,
        status: int = 200,
        content_type: str = "text/plain",
    ) -> None:
        served = (status, content_type, body.encode())

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                code, kind, data = served
                self.send_response(code)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self.address = (
            f"127.{random.randint(1, 254)}.{random.randint(1, 254)}.{random.randint(2, 254)}"
        )
        try:
            self.httpd = ThreadingHTTPServer((self.address, 443), Handler)
        except PermissionError:
            pytest.fail("binding port 443 on loopback needs root (or CAP_NET_BIND_SERVICE)")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ca.issue_cert(*names).configure_cert(context)
        self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> PolicyServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)


def ca_file(ca: trustme.CA, where: Path) -> str:
    """The CA's certificate as a file, for SSL_CERT_FILE."""
    path = where / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)
