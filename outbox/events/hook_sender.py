"""One signed POST of an event to an endpoint, bounded in time and size.

No redirect is followed (a 3xx is an answer like any other), at most 64 KiB
of the answer's body is read (so that a short one leaves the connection open
for the next event) and nothing of it kept, and every phase (connect,
send, wait for the answer) has its deadline: a slow or hostile receiver
costs at most that time of one connection.
"""

from __future__ import annotations

import httpx

from outbox.events.hook_target import Target
from outbox.events.retry_schedule import Answer

MAX_ANSWER = 64 * 1024
MAX_BODY = 256 * 1024  # an event's body is far smaller; a larger one is a fault of ours


class Sender:
    """Posts events over kept-alive connections, ``connections`` at most at once."""

    def __init__(self, *, timeout: float, connections: int) -> None:
        self.client = httpx.Client(
            follow_redirects=False,
            timeout=httpx.Timeout(timeout),
            limits=httpx.Limits(max_connections=connections, max_keepalive_connections=connections),
            trust_env=False,  # a proxy from the environment would bypass the address check
            headers={"user-agent": "outbox-webhooks"},
        )

    def post(self, target: Target, body: bytes, headers: dict[str, str]) -> Answer:
        if len(body) > MAX_BODY:
            return Answer(413, f"the event's body is over {MAX_BODY} bytes")
        extensions = {"sni_hostname": target.sni_hostname} if target.sni_hostname else {}
        try:
            with self.client.stream(
                "POST",
                target.request_url,
                content=body,
                headers={**headers, "host": target.host_header},
                extensions=extensions,
            ) as response:
                status = response.status_code
                _drain(response)
        except httpx.TimeoutException:
            return Answer(None, "timed out")
        except httpx.HTTPError as exc:
            return Answer(None, f"no answer: {type(exc).__name__}")
        return Answer(status, "" if 200 <= status < 300 else f"HTTP {status}")

    def close(self) -> None:
        self.client.close()


def _drain(response: httpx.Response) -> None:
    """Read a short answer's body to its end; a longer one closes its connection."""
    read = 0
    for chunk in response.iter_raw():
        read += len(chunk)
        if read > MAX_ANSWER:
            return
