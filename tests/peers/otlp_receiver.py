"""A minimal OTLP/HTTP trace receiver for the e2e tests: accepts `POST /v1/traces` with an
`application/x-protobuf` body, decodes it with the official protobuf types
(`opentelemetry-proto`), and appends one JSON line per span to OUT:

    {"name", "trace_id", "span_id", "parent_span_id" (hex, "" for a root),
     "service_name", "attributes": {key: string value}}

Answers 200 with an empty `ExportTraceServiceResponse`. Prints `listening PORT` on stdout once
bound (port 0 picks one).

Usage: otlp_receiver.py OUT [PORT]
"""

import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
    ExportTraceServiceResponse,
)

OUT = sys.argv[1]


def value_text(any_value):
    kind = any_value.WhichOneof("value")
    return "" if kind is None else str(getattr(any_value, kind))


class Receiver(BaseHTTPRequestHandler):
    def do_POST(self):
        length = int(self.headers.get("Content-Length", "0"))
        body = self.rfile.read(length)
        if self.path != "/v1/traces" or self.headers.get("Content-Type") != "application/x-protobuf":
            self.send_error(404 if self.path != "/v1/traces" else 415)
            return
        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        lines = []
        for resource_spans in request.resource_spans:
            resource = {a.key: value_text(a.value) for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    lines.append(
                        json.dumps(
                            {
                                "name": span.name,
                                "trace_id": span.trace_id.hex(),
                                "span_id": span.span_id.hex(),
                                "parent_span_id": span.parent_span_id.hex(),
                                "service_name": resource.get("service.name", ""),
                                "attributes": {a.key: value_text(a.value) for a in span.attributes},
                            },
                            sort_keys=True,
                        )
                    )
        with open(OUT, "a", encoding="utf-8") as out:
            for line in lines:
                out.write(line + "\n")
        answer = ExportTraceServiceResponse().SerializeToString()
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, format, *args):  # noqa: A002 - the base class's name
        sys.stderr.write("otlp_receiver: " + (format % args) + "\n")


def main():
    port = int(sys.argv[2]) if len(sys.argv) > 2 else 0
    server = ThreadingHTTPServer(("127.0.0.1", port), Receiver)
    print(f"listening {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
