"""Small authoritative DNS servers on loopback UDP: MX answers for pacing tests,
whole zones for the domain authentication checks."""

from __future__ import annotations

import socket
import threading

import dns.flags
import dns.message
import dns.name
import dns.rcode
import dns.rdataclass
import dns.rdatatype
import dns.rrset
import dns.zone


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


class ZoneServer(DnsServer):
    """An authoritative server of whole zones (RFC 1035 master-file text), on loopback UDP.

    Any name and type the zones hold is answered with the authoritative flag;
    a name they hold without the type gets an empty answer, any other
    NXDOMAIN; TXT records longer than 255 bytes are split as DNS carries them.
    """

    def __init__(self, *zones: str, ttl: int = 300) -> None:
        super().__init__({}, ttl)
        self.zones = [
            dns.zone.from_text(text, relativize=False, check_origin=False) for text in zones
        ]

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                data, peer = self._sock.recvfrom(4096)
            except TimeoutError:
                continue
            query = dns.message.from_wire(data)
            question = query.question[0]
            self.queries.append(question.name.to_text().rstrip(".").lower())
            response = dns.message.make_response(query)
            response.flags |= dns.flags.AA
            self._answer(response, question.name, question.rdtype)
            self._sock.sendto(response.to_wire(max_size=65535), peer)

    def _answer(self, response: dns.message.Message, name: dns.name.Name, rdtype: int) -> None:
        for zone in self.zones:
            if not name.is_subdomain(zone.origin):
                continue
            node = zone.get_node(name)
            if node is None:
                response.set_rcode(dns.rcode.NXDOMAIN)
                return
            cname = node.get_rdataset(dns.rdataclass.IN, dns.rdatatype.CNAME)
            if cname is not None and rdtype != dns.rdatatype.CNAME:
                response.answer.append(dns.rrset.from_rdata_list(name, cname.ttl, cname))
                self._answer(response, cname[0].target, rdtype)
                return
            found = node.get_rdataset(dns.rdataclass.IN, rdtype)
            if found is not None:
                response.answer.append(dns.rrset.from_rdata_list(name, found.ttl, found))
            return
        response.set_rcode(dns.rcode.REFUSED)  # not ours: an authoritative server does not recurse
