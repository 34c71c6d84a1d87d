"""One signed POST of an event to an endpoint, bounded in time and size.

urllib3, not httpx: a request costs about a fifth of the CPU (some 200 µs
against 900 µs here), which decides how many events one deliverer posts per
second. The request goes to the address :mod:`outbox.events.hook_target`
checked, with the endpoint's name as Host and, for https, as the name its
certificate must carry. No redirect is followed (a 3xx is an answer like any
other), nothing is retried here (the schedule does it), at most 64 KiB of
the answer's body is read (so that a short one leaves the connection open
for the next event) and nothing of it kept, and connecting and each read
have their deadline: a slow or hostile receiver costs at most that time.
"""

from __future__ import annotations

import threading

import urllib3
from urllib3.exceptions import HTTPError, TimeoutError

from outbox.events.hook_target import Target
from outbox.events.retry_schedule import Answer

MAX_ANSWER = 64 * 1024
MAX_BODY = 256 * 1024  # an event's body is far smaller; a larger one is a fault of ours
Pool = urllib3.HTTPConnectionPool | urllib3.HTTPSConnectionPool


class Sender:
    """Posts events over kept-alive connections, ``connections`` at most per target."""

    def __init__(self, *, timeout: float, connections: int) -> None:
        self.timeout = urllib3.Timeout(connect=timeout, read=timeout)
        self.connections = connections
        self._pools: dict[tuple[str, str, int, str | None], Pool] = {}
        self._lock = threading.Lock()

    def post(self, target: Target, body: bytes, headers: dict[str, str]) -> Answer:
        if len(body) > MAX_BODY:
            return Answer(413, f"the event's body is over {MAX_BODY} bytes")
        try:
            response = self._pool(target).urlopen(
                "POST",
                target.path,
                body=body,
                headers={**headers, "host": target.host_header, "user-agent": "outbox-webhooks"},
                redirect=False,
                retries=False,
                preload_content=False,
                timeout=self.timeout,
            )
            status = response.status
            _drain(response)
        except TimeoutError:
            return Answer(None, "timed out")
        except HTTPError as exc:
            return Answer(None, f"no answer: {type(exc).__name__}")
        return Answer(status, "" if 200 <= status < 300 else f"HTTP {status}")

    def _pool(self, target: Target) -> Pool:
        key = (target.scheme, target.address, target.port, target.sni_hostname)
        with self._lock:
            pool = self._pools.get(key)
            if pool is None:
                pool = self._new_pool(target)
                self._pools[key] = pool
            return pool

    def _new_pool(self, target: Target) -> Pool:
        if target.scheme == "https":
            return urllib3.HTTPSConnectionPool(
                target.address,
                target.port,
                maxsize=self.connections,
                block=True,
                timeout=self.timeout,
                server_hostname=target.sni_hostname,
                assert_hostname=target.sni_hostname or target.address,
                cert_reqs="CERT_REQUIRED",
            )
        return urllib3.HTTPConnectionPool(
            target.address, target.port, maxsize=self.connections, block=True, timeout=self.timeout
        )

    def close(self) -> None:
        with self._lock:
            for pool in self._pools.values():
                pool.close()
            self._pools.clear()


def _drain(response: urllib3.BaseHTTPResponse) -> None:
    """Read a short answer's body to its end; a longer one closes its connection."""
    read = 0
    for chunk in response.stream(16 * 1024, decode_content=False):
        read += len(chunk)
        if read > MAX_ANSWER:
            response.close()
            break
    response.release_conn()
