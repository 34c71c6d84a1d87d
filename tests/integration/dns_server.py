"""A small authoritative DNS server on loopback UDP, for MX lookups in tests."""

from __future__ import annotations

import socket
import threading

import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset


class DnsServer:
    """Answers MX queries from ``records`` (domain -> [(preference, host)]); others NXDOMAIN."""

    def __init__(self, records: dict[str, list[tuple[int, str]]], ttl: int = 300) -> None:
        self.records = records
        self.ttl = ttl
        self.queries: list[str] = []
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._sock.bind(("127.0.0.1", 0))
        self._sock.settimeout(0.2)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    @property
    def address(self) -> str:
        host, port = self._sock.getsockname()
        return f"{host}:{port}"

    def start(self) -> DnsServer:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self._sock.close()

    def __enter__(self) -> DnsServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self._sock.recvfrom(4096)
            except TimeoutError:
                continue
            query = dns.message.from_wire(data)
            question = query.question[0]
            name = question.name.to_text().rstrip(".").lower()
            self.queries.append(name)
            response = dns.message.make_response(query)
            records = self.records.get(name)
            if records is None:
                response.set_rcode(dns.rcode.NXDOMAIN)
            elif question.rdtype == dns.rdatatype.MX:
                texts = [f"{preference} {host.rstrip('.')}." for preference, host in records]
                response.answer.append(
                    dns.rrset.from_text_list(question.name, self.ttl, "IN", "MX", texts)
                )
            self._sock.sendto(response.to_wire(), peer)
