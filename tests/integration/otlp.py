"""A minimal OTLP/HTTP trace receiver on loopback, decoding the protobuf export requests."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)
from opentelemetry.proto.common.v1.common_pb2 import AnyValue


@dataclass
class ReceivedSpan:
    service: str
    name: str
    kind: int
    trace_id: str
    span_id: str
    parent_span_id: str
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    links: list[tuple[str, str]]  # (trace id, span id)
    status_code: int


@dataclass
class Receiver:
    port: int = 0
    spans: list[ReceivedSpan] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def named(self, name: str) -> list[ReceivedSpan]:
        with self.lock:
            return [s for s in self.spans if s.name == name]


def _value(value: AnyValue) -> Any:
    kind = value.WhichOneof("value")
    if kind == "array_value":
        return [_value(v) for v in value.array_value.values]
    return getattr(value, kind) if kind else None


def _decode(body: bytes) -> list[ReceivedSpan]:
    request = ExportTraceServiceRequest()
    request.ParseFromString(body)
    found = []
    for resource_spans in request.resource_spans:
        resource = {a.key: _value(a.value) for a in resource_spans.resource.attributes}
        for scope_spans in resource_spans.scope_spans:
            for span in scope_spans.spans:
                found.append(
                    ReceivedSpan(
                        service=resource.get("service.name", ""),
                        name=span.name,
                        kind=span.kind,
                        trace_id=span.trace_id.hex(),
                        span_id=span.span_id.hex(),
                        parent_span_id=span.parent_span_id.hex(),
                        attributes={a.key: _value(a.value) for a in span.attributes},
                        events=[
                            (e.name, {a.key: _value(a.value) for a in e.attributes})
                            for e in span.events
                        ],
                        links=[(link.trace_id.hex(), link.span_id.hex()) for link in span.links],
                        status_code=span.status.code,
                    )
                )
    return found


@contextmanager
def otlp_receiver() -> Iterator[Receiver]:
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            spans = _decode(body) if self.path == "/v1/traces" else []
            with receiver.lock:
                receiver.spans.extend(spans)
            reply = ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("Content-Type", "application/x-protobuf")
            self.send_header("Content-Length", str(len(reply)))
            self.end_headers()
            self.wfile.write(reply)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    receiver.port = server.server_address[1]
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield receiver
    finally:
        server.shutdown()
        server.server_close()
        thread.join()
