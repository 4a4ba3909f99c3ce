"""ACL APIs with Kafka's numbers and fields: DescribeAcls (29), CreateAcls (30), DeleteAcls
(31) (docs/security.md, "Authorization"). Enum fields carry Kafka's numbers
(client/security/acl.py): resource type (1 ANY, 2 TOPIC, 3 GROUP, 4 CLUSTER, 5
TRANSACTIONAL_ID), pattern type (1 ANY, 2 MATCH, 3 LITERAL, 4 PREFIXED), operation (1 ANY, 2
ALL, 3 READ, 4 WRITE, 5 CREATE, 6 DELETE, 7 ALTER, 8 DESCRIBE, 9 CLUSTER_ACTION, 10
DESCRIBE_CONFIGS, 11 ALTER_CONFIGS, 12 IDEMPOTENT_WRITE), permission (1 ANY, 2 DENY, 3 ALLOW).
Creating and deleting need ALTER on the cluster, describing DESCRIBE on the cluster.
"""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.apis.data import THROTTLE
from client.protocol.schema import (
    INT8,
    INT16,
    STRING,
    ApiSpec,
    Array,
    Field,
    Nullable,
    Struct,
    register,
)

ERROR_MESSAGE = Field("error_message", Nullable(STRING), default=None)


def _filter_fields() -> tuple[Field, ...]:
    return (
        Field("resource_type_filter", INT8),
        Field("resource_name_filter", Nullable(STRING), default=None),
        Field("pattern_type_filter", INT8, default=3),
        Field("principal_filter", Nullable(STRING), default=None),
        Field("host_filter", Nullable(STRING), default=None),
        Field("operation", INT8),
        Field("permission_type", INT8),
    )


DESCRIBE_ACLS = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_ACLS,
        name="DescribeAcls",
        doc="The ACLs a filter matches (nil fields match any value; pattern MATCH matches the "
        "LITERAL, `*` and PREFIXED patterns covering the name), grouped by resource pattern. "
        "A bad filter gets INVALID_REQUEST; without DESCRIBE on the cluster, "
        "CLUSTER_AUTHORIZATION_FAILED; without an authorizer, SECURITY_DISABLED.",
        request=Struct(*_filter_fields()),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0),
            ERROR_MESSAGE,
            Field(
                "resources",
                Array(
                    Struct(
                        Field("resource_type", INT8),
                        Field("resource_name", STRING),
                        Field("pattern_type", INT8),
                        Field(
                            "acls",
                            Array(
                                Struct(
                                    Field("principal", STRING),
                                    Field("host", STRING),
                                    Field("operation", INT8),
                                    Field("permission_type", INT8),
                                    name="AclDescription",
                                )
                            ),
                            default=list,
                        ),
                        name="DescribeAclsResource",
                    )
                ),
                default=list,
            ),
        ),
    )
)

CREATE_ACLS = register(
    ApiSpec(
        key=ApiKey.CREATE_ACLS,
        name="CreateAcls",
        doc="Create ACLs; one result per creation, in order. An invalid one (UNKNOWN or ANY "
        "types, an operation that does not apply to the resource type, an empty name, a "
        "principal not of the form TYPE:NAME) gets INVALID_REQUEST and is not created; an "
        "ACL that already exists succeeds without a second copy.",
        request=Struct(
            Field(
                "creations",
                Array(
                    Struct(
                        Field("resource_type", INT8),
                        Field("resource_name", STRING),
                        Field("resource_pattern_type", INT8, default=3),
                        Field("principal", STRING),
                        Field("host", STRING),
                        Field("operation", INT8),
                        Field("permission_type", INT8),
                        name="AclCreation",
                    )
                ),
            ),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0, doc="whole-request error"),
            ERROR_MESSAGE,
            Field(
                "results",
                Array(Struct(Field("error_code", INT16), ERROR_MESSAGE, name="AclCreationResult")),
                default=list,
            ),
        ),
    )
)

DELETE_ACLS = register(
    ApiSpec(
        key=ApiKey.DELETE_ACLS,
        name="DeleteAcls",
        doc="Delete every ACL each filter matches; one result per filter listing the ACLs "
        "it deleted.",
        request=Struct(
            Field("filters", Array(Struct(*_filter_fields(), name="DeleteAclsFilter"))),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0, doc="whole-request error"),
            ERROR_MESSAGE,
            Field(
                "filter_results",
                Array(
                    Struct(
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        Field(
                            "matching_acls",
                            Array(
                                Struct(
                                    Field("error_code", INT16),
                                    ERROR_MESSAGE,
                                    Field("resource_type", INT8),
                                    Field("resource_name", STRING),
                                    Field("pattern_type", INT8),
                                    Field("principal", STRING),
                                    Field("host", STRING),
                                    Field("operation", INT8),
                                    Field("permission_type", INT8),
                                    name="DeleteAclsMatchingAcl",
                                )
                            ),
                            default=list,
                        ),
                        name="DeleteAclsFilterResult",
                    )
                ),
                default=list,
            ),
        ),
    )
)
