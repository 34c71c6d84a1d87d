"""A loopback TCP front for Postgres that loses the answer to one statement.

Armed with a marker (bytes of a statement's text), it forwards the client's
message that holds it, waits for Postgres's answer, throws the answer away
and closes both sides: the statement ran (and, in autocommit, committed) but
the client only sees its connection drop. Every other connection and byte
passes as it comes, so the client's next connection works.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class LostAnswer:
    def __init__(self, upstream: tuple[str, int], host: str = "127.0.0.1") -> None:
        self.upstream = upstream
        self._listener = socket.create_server((host, 0))
        self._listener.settimeout(0.2)
        self.host, self.port = self._listener.getsockname()[:2]
        self._marker: bytes | None = None
        self.cut = threading.Event()  # set once an answer was thrown away
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, database_url: str) -> str:
        """``database_url`` pointed at this front (host and port replaced)."""
        scheme, rest = database_url.split("://", 1)
        netloc, _, path = rest.partition("/")
        user = netloc.rsplit("@", 1)[0] + "@" if "@" in netloc else ""
        return f"{scheme}://{user}{self.host}:{self.port}/{path}"

    def arm(self, marker: bytes) -> None:
        """Lose the answer to the next client message that contains ``marker``."""
        self.cut.clear()
        with self._lock:
            self._marker = marker

    def close(self) -> None:
        self._stop.set()
        self._listener.close()
        with self._lock:
            sockets, self._sockets = self._sockets, []
        for sock in sockets:
            _close(sock)

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                client, _ = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server = socket.create_connection(self.upstream, timeout=5)
            with self._lock:
                self._sockets += [client, server]
            marked = threading.Event()  # the client sent the marked message
            threading.Thread(target=self._up, args=(client, server, marked), daemon=True).start()
            threading.Thread(target=self._down, args=(server, client, marked), daemon=True).start()

    def _up(self, client: socket.socket, server: socket.socket, marked: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := client.recv(65536):
                with self._lock:
                    hit = self._marker is not None and self._marker in data
                    if hit:
                        self._marker = None
                if hit:
                    marked.set()
                server.sendall(data)
        _close(server)

    def _down(self, server: socket.socket, client: socket.socket, marked: threading.Event) -> None:
        with contextlib.suppress(OSError):
            while data := server.recv(65536):
                if marked.is_set():
                    # Postgres answered the marked statement: the answer is lost.
                    self.cut.set()
                    break
                client.sendall(data)
        _close(client)
        _close(server)


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
