"""Parse bounces in a child process, each within a deadline.

Why a process and not a thread: the parser is Python and regular expressions,
and a regular expression holds the interpreter lock until it returns. Parsed
in a thread of the bounce server, one costly message stopped the SMTP event
loop with it (no 250 for anyone), and a thread cannot be stopped when its
deadline passes. A child process runs beside the server, and when a message
overruns its deadline the child is killed and a fresh one started: the
message is set aside as unprocessable and the next one goes on.

One worker serves one caller thread at a time (the bounce server's single
processing thread, or a command).
"""

from __future__ import annotations

import logging
import multiprocessing
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from types import TracebackType

from outbox.bounce_parsing import BounceResult, parse_bounce
from outbox.errors import OutboxError

log = logging.getLogger(__name__)

# Seconds one message may take to parse. A genuine bounce takes milliseconds
# and 10 MB of hostile text well under one; a message past this is not a
# bounce anyone can use.
PARSE_DEADLINE = 5.0


class ParseDeadlineExceeded(OutboxError):
    """The message took longer than its deadline to parse."""


class ParseFailed(OutboxError):
    """The parser raised on the message (the child's error, as text)."""


def _serve(requests: Connection) -> None:
    """The child: parse each message received, answer with the results or the error."""
    while True:
        try:
            raw = requests.recv_bytes()
        except EOFError:
            return
        try:
            answer: tuple[str, object] = ("ok", parse_bounce(raw))
        except Exception as exc:
            answer = ("error", f"{type(exc).__name__}: {exc}")
        requests.send(answer)


class ParseWorker:
    def __init__(self, deadline: float = PARSE_DEADLINE) -> None:
        self.deadline = deadline
        # spawn: a fresh interpreter, never a fork of a process that has threads.
        self._context = multiprocessing.get_context("spawn")
        self._process: BaseProcess | None = None
        self._pipe: Connection | None = None

    def parse(self, raw: bytes) -> list[BounceResult]:
        """The message's results; raises ParseDeadlineExceeded or ParseFailed."""
        pipe = self._started()
        pipe.send_bytes(raw)
        if not pipe.poll(self.deadline):
            self.close()  # killed mid-parse: the next message gets a fresh child
            raise ParseDeadlineExceeded(f"parsing took longer than {self.deadline:g} s")
        try:
            kind, payload = pipe.recv()
        except EOFError:
            self.close()
            raise ParseFailed("the parsing process died") from None
        if kind != "ok":
            raise ParseFailed(str(payload))
        results: list[BounceResult] = payload
        return results

    def _started(self) -> Connection:
        if self._pipe is None or self._process is None or not self._process.is_alive():
            self.close()
            ours, theirs = self._context.Pipe()
            process = self._context.Process(
                target=_serve, args=(theirs,), name="outbox-bounce-parser", daemon=True
            )
            process.start()
            theirs.close()
            self._process, self._pipe = process, ours
        return self._pipe

    def close(self) -> None:
        if self._pipe is not None:
            self._pipe.close()
        if self._process is not None:
            self._process.kill()
            self._process.join(timeout=5)
            self._process.close()
        self._process, self._pipe = None, None

    def __enter__(self) -> ParseWorker:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
