"""An HTTP receiver that answers every POST with 200 after ``--reply-ms``, for
bench/bench_events.py: uvicorn in a process of its own, so that its work is
not counted as the deliverer's. Prints ``listening PORT`` once it listens."""

from __future__ import annotations

import argparse
import asyncio
import socket
from typing import Any

import uvicorn


def app(reply_ms: float) -> Any:
    async def answer(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        more = True
        while more:  # the whole body, as a receiver reads it
            message = await receive()
            more = message.get("more_body", False)
        await asyncio.sleep(reply_ms / 1000)
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return answer


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reply-ms", type=float, default=20.0)
    args = parser.parse_args()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(2048)  # connections wait in the backlog until uvicorn takes them
    print(f"listening {sock.getsockname()[1]}", flush=True)
    config = uvicorn.Config(app(args.reply_ms), log_level="warning", access_log=False, backlog=2048)
    uvicorn.Server(config).run(sockets=[sock])


if __name__ == "__main__":
    main()
