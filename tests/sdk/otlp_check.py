"""Parse OTLP/HTTP JSON trace exports strictly with the official protobuf definitions
(opentelemetry-proto) and print what they hold, for tests/agent/agent_otel.rs.

    otlp_check.py BODY.json...

Each file is one `POST /v1/traces` body. OTLP's JSON encoding is protobuf's JSON mapping
except that trace and span ids are hex, not base64: each id is checked to be lowercase hex of
the right length (32 digits for a trace, 16 for a span) and turned into base64 before
`json_format.Parse`, which refuses any field the definitions do not have. Prints one JSON
document: per body, its resource attributes, its scopes and its spans as parsed (ids back in
hex, enums by name, attribute values as JSON values). Exits 1 with the reason on the first
body that does not parse.
"""

import base64
import json
import re
import sys

from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest
from opentelemetry.proto.trace.v1 import trace_pb2

ID_LENGTH = {"traceId": 32, "spanId": 16, "parentSpanId": 16}


def ids_to_base64(obj, where):
    """Turn every hex id under `obj` into base64, checking its form."""
    if isinstance(obj, list):
        for i, item in enumerate(obj):
            ids_to_base64(item, f"{where}[{i}]")
    elif isinstance(obj, dict):
        for key, value in obj.items():
            if key in ID_LENGTH:
                n = ID_LENGTH[key]
                if not isinstance(value, str) or not re.fullmatch(f"[0-9a-f]{{{n}}}", value):
                    raise ValueError(f"{where}.{key} is not {n} lowercase hex digits: {value!r}")
                obj[key] = base64.b64encode(bytes.fromhex(value)).decode()
            else:
                ids_to_base64(value, f"{where}.{key}")


def any_value(v):
    kind = v.WhichOneof("value")
    if kind in ("string_value", "bool_value", "int_value", "double_value"):
        return getattr(v, kind)
    raise ValueError(f"an attribute value of kind {kind}")


def attributes(kvs):
    out = {}
    for kv in kvs:
        if kv.key in out:
            raise ValueError(f"attribute {kv.key} twice")
        out[kv.key] = any_value(kv.value)
    return out


def span(s):
    return {
        "trace_id": s.trace_id.hex(),
        "span_id": s.span_id.hex(),
        "parent_span_id": s.parent_span_id.hex(),
        "name": s.name,
        "kind": trace_pb2.Span.SpanKind.Name(s.kind),
        "start": s.start_time_unix_nano,
        "end": s.end_time_unix_nano,
        "attributes": attributes(s.attributes),
        "events": [{"name": e.name, "time": e.time_unix_nano, "attributes": attributes(e.attributes)} for e in s.events],
        "links": [{"trace_id": l.trace_id.hex(), "span_id": l.span_id.hex()} for l in s.links],
        "status": {"code": trace_pb2.Status.StatusCode.Name(s.status.code), "message": s.status.message},
    }


def main(paths):
    bodies = []
    for path in paths:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
        ids_to_base64(doc, path)
        request = ExportTraceServiceRequest()
        json_format.Parse(json.dumps(doc), request, ignore_unknown_fields=False)
        resources = []
        for rs in request.resource_spans:
            resources.append({
                "attributes": attributes(rs.resource.attributes),
                "scopes": [
                    {"name": ss.scope.name, "version": ss.scope.version, "spans": [span(s) for s in ss.spans]}
                    for ss in rs.scope_spans
                ],
            })
        bodies.append(resources)
    json.dump(bodies, sys.stdout)


if __name__ == "__main__":
    try:
        main(sys.argv[1:])
    except Exception as e:  # the test shows the reason
        print(f"otlp_check: {type(e).__name__}: {e}", file=sys.stderr)
        sys.exit(1)
