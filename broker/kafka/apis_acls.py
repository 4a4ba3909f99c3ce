"""The ACL APIs on the Kafka listener: DescribeAcls (29), CreateAcls (30), DeleteAcls (31),
versions 1-3 (with pattern types, KIP-290), translated to the native handlers
(broker/handlers/acls.py), whose fields are Kafka's own. Threads: I/O threads; CreateAcls and
DeleteAcls answer from the thread the controller's answer arrives on.
"""

from __future__ import annotations

from broker.kafka.apis import api
from broker.kafka.kio_requests import CreateAclsRequest, DeleteAclsRequest, DescribeAclsRequest
from broker.kafka.request import KafkaContext, whole_error
from client.protocol import ApiKey
from client.protocol.body import Body

_FILTER = (
    "resource_type_filter",
    "resource_name_filter",
    "pattern_type_filter",
    "principal_filter",
    "host_filter",
    "operation",
    "permission_type",
)
_CREATION = (
    "resource_type",
    "resource_name",
    "resource_pattern_type",
    "principal",
    "host",
    "operation",
    "permission_type",
)


def _fields(entity: object, names: tuple[str, ...]) -> Body:
    out = {}
    for n in names:
        v = getattr(entity, n)
        out[n] = int(v) if n not in ("resource_name_filter", "principal_filter", "host_filter",
                                      "resource_name", "principal", "host") else v  # fmt: skip
    return out


@api(ApiKey.DESCRIBE_ACLS, 1, 3)
def describe_acls(ctx: KafkaContext, body: DescribeAclsRequest) -> None:
    def answer(a: Body) -> None:
        code = whole_error(a) or int(a.get("error_code", 0))
        ctx.respond(
            {
                "throttle_time": 0,
                "error_code": code,
                "error_message": a.get("error_message"),
                "resources": a.get("resources", []) if not whole_error(a) else [],
            },
            code,
        )

    ctx.call_native(ApiKey.DESCRIBE_ACLS, _fields(body, _FILTER), answer)


@api(ApiKey.CREATE_ACLS, 1, 3)
def create_acls(ctx: KafkaContext, body: CreateAclsRequest) -> None:
    creations = [_fields(c, _CREATION) for c in body.creations]

    def answer(a: Body) -> None:
        code = whole_error(a)
        results = (
            [{"error_code": code, "error_message": a.get("error_message")}] * len(creations)
            if code
            else a["results"]
        )
        ctx.respond({"throttle_time": 0, "results": results}, code)

    ctx.call_native(ApiKey.CREATE_ACLS, {"creations": creations}, answer)


@api(ApiKey.DELETE_ACLS, 1, 3)
def delete_acls(ctx: KafkaContext, body: DeleteAclsRequest) -> None:
    filters = [_fields(f, _FILTER) for f in body.filters]

    def answer(a: Body) -> None:
        code = whole_error(a)
        results = (
            [{"error_code": code, "error_message": a.get("error_message"), "matching_acls": []}]
            * len(filters)
            if code
            else a["filter_results"]
        )
        ctx.respond({"throttle_time": 0, "filter_results": results}, code)

    ctx.call_native(ApiKey.DELETE_ACLS, {"filters": filters}, answer)
