"""A port this process is to listen on, checked before anything starts.

Two processes configured with the same fixed port (two pools, or two
deployments on one host) would otherwise fail in a corner: Dramatiq's metrics
server logs a traceback in a child and the pool runs on without metrics, or
the second exporter never serves. The process refuses to start instead, with
one line that names the setting.
"""

from __future__ import annotations

import errno
import socket

from outbox.errors import ConfigError


def ensure_free(host: str, port: int, setting: str) -> None:
    """Raise ConfigError when ``host:port`` cannot be listened on (0: any port, always free)."""
    if not port:
        return
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        # As the servers bind: a port left in TIME_WAIT by an earlier run is free.
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise ConfigError(
                    f"{setting}: port {port} on {host} is already in use by another process;"
                    " give this process a port of its own"
                ) from None
            said = exc.strerror or type(exc).__name__
            raise ConfigError(f"{setting}: cannot listen on {host}:{port} ({said})") from None
