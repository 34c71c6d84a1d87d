"""An SMTP relay that answers each command a fixed delay after it arrives.

It models a relay one network round trip away (or one that takes that long to
decide each reply): 2 ms is a relay in the same region, 20 ms one in another.
Every reply waits, the greeting and the final reply after the message's dot
included; commands that arrive together (PIPELINING, which it offers, as real
relays do) are answered together. So a message costs the sender two delays on
a reused connection: MAIL, RCPT and DATA in one write, then the message and its
dot. Messages are read and thrown away.

One event loop (uvloop's where installed), no SMTP library and a timer per
reply: its CPU per message is a fraction of the worker's (bench_delivery
reports both), so on a small machine the relay stays out of the way of what is
measured.

    python -m bench.slow_relay --reply-ms 20 [--port 0]

prints ``port N`` once it listens, then serves until SIGTERM or SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import itertools
import signal
from typing import cast

GREETING = b"220 slow-relay ESMTP\r\n"
EHLO = b"250-slow-relay\r\n250-PIPELINING\r\n250-8BITMIME\r\n250-SMTPUTF8\r\n250 SIZE 52428800\r\n"
REPLIES = {
    b"EHLO": EHLO,
    b"HELO": b"250 slow-relay\r\n",
    b"MAIL": b"250 2.1.0 Ok\r\n",
    b"RCPT": b"250 2.1.5 Ok\r\n",
    b"DATA": b"354 End data with <CR><LF>.<CR><LF>\r\n",
    b"RSET": b"250 2.0.0 Ok\r\n",
    b"NOOP": b"250 2.0.0 Ok\r\n",
    b"QUIT": b"221 2.0.0 Bye\r\n",
}
UNKNOWN = b"502 5.5.2 Error: command not recognized\r\n"
END_OF_DATA = b"\r\n.\r\n"
_QUEUE_IDS = itertools.count(1)


class Session(asyncio.Protocol):
    """One client's connection: lines in, replies out after ``delay`` seconds."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.buffer = b""
        self.in_data = False  # between DATA's 354 and the dot
        self.pending: collections.deque[bytes] = collections.deque()  # replies due, in order
        self.quitting = False
        self.lost = False
        self.transport: asyncio.WriteTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not asyncio.Transport subclasses; both write.
        self.transport = cast(asyncio.WriteTransport, transport)
        self.answer(GREETING)

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        replies = []
        while not self.quitting:
            if self.in_data:
                end = self.buffer.find(END_OF_DATA)
                if end < 0:
                    self.buffer = self.buffer[-4:]  # the message is not kept; a dot may straddle
                    break
                self.buffer = self.buffer[end + len(END_OF_DATA) :]
                self.in_data = False
                replies.append(b"250 2.0.0 Ok: queued as %d\r\n" % next(_QUEUE_IDS))
                continue
            line, found, rest = self.buffer.partition(b"\r\n")
            if not found:
                break
            self.buffer = rest
            verb = line[:4].upper()
            replies.append(REPLIES.get(verb, UNKNOWN))
            if verb == b"DATA":
                # The line end before the message's first line: an empty message's dot matches.
                self.in_data, self.buffer = True, b"\r\n" + self.buffer
            self.quitting = verb == b"QUIT"
        if replies:
            self.answer(b"".join(replies))

    def answer(self, reply: bytes) -> None:
        self.pending.append(reply)
        # Each timer sends the oldest reply due: timers due at the same instant
        # may fire in any order, the replies still leave in theirs.
        asyncio.get_running_loop().call_later(self.delay, self.send_oldest)

    def send_oldest(self) -> None:
        reply = self.pending.popleft()
        if self.lost or self.transport is None:
            return
        self.transport.write(reply)
        if self.quitting and not self.pending:
            self.transport.close()


async def serve(port: int, delay: float) -> None:
    loop = asyncio.get_running_loop()
    server = await loop.create_server(lambda: Session(delay), "127.0.0.1", port, backlog=1024)
    print(f"port {server.sockets[0].getsockname()[1]}", flush=True)
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    async with server:
        await stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reply-ms", type=float, required=True, help="delay before each reply")
    parser.add_argument("--port", type=int, default=0, help="0: any free port")
    args = parser.parse_args()
    try:
        import uvloop  # noqa: PLC0415 (half the CPU per message of asyncio's own loop)
    except ImportError:
        asyncio.run(serve(args.port, args.reply_ms / 1000))
    else:
        uvloop.run(serve(args.port, args.reply_ms / 1000))


if __name__ == "__main__":
    main()
