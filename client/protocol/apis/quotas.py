"""Client quota APIs: DescribeClientQuotas (48) and AlterClientQuotas (49), with Kafka's
numbers and fields (docs/security.md, "Quotas").

An entity is a list of {entity_type, entity_name} ("user" or "client-id"; a nil name is that
type's default). Quota keys: producer_byte_rate, consumer_byte_rate (bytes per second) and
request_percentage (percent of one thread's time).
"""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.apis.data import THROTTLE
from client.protocol.schema import (
    BOOL,
    FLOAT64,
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
ENTITY = Field(
    "entity",
    Array(
        Struct(
            Field("entity_type", STRING),
            Field("entity_name", Nullable(STRING), default=None),
            name="EntityData",
        )
    ),
)

DESCRIBE_CLIENT_QUOTAS = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_CLIENT_QUOTAS,
        name="DescribeClientQuotas",
        doc="The quotas of every entity matching all `components`: match_type 0 an entity "
        "of that type named `match`, 1 that type's default entity, 2 any named (not default) "
        "entity of that type. `strict`: the entity has no other types than the components "
        "name. A type filtered twice, or an unknown type, gets INVALID_REQUEST.",
        request=Struct(
            Field(
                "components",
                Array(
                    Struct(
                        Field("entity_type", STRING),
                        Field("match_type", INT8),
                        Field("match", Nullable(STRING), default=None),
                        name="ComponentData",
                    )
                ),
                default=list,
            ),
            Field("strict", BOOL, default=False),
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0),
            ERROR_MESSAGE,
            Field(
                "entries",
                Nullable(
                    Array(
                        Struct(
                            ENTITY,
                            Field(
                                "values",
                                Array(
                                    Struct(
                                        Field("key", STRING),
                                        Field("value", FLOAT64),
                                        name="ValueData",
                                    )
                                ),
                            ),
                            name="EntryData",
                        )
                    )
                ),
                default=list,
            ),
        ),
    )
)

ALTER_CLIENT_QUOTAS = register(
    ApiSpec(
        key=ApiKey.ALTER_CLIENT_QUOTAS,
        name="AlterClientQuotas",
        doc="Set (value) or remove (`remove` true) quota keys of each entity; each entry "
        "succeeds or fails whole. INVALID_REQUEST: an unknown entity type or quota key, a "
        "type named twice, a value not positive (byte rates: a whole number). "
        "`validate_only`: check, change nothing.",
        request=Struct(
            Field(
                "entries",
                Array(
                    Struct(
                        ENTITY,
                        Field(
                            "ops",
                            Array(
                                Struct(
                                    Field("key", STRING),
                                    Field("value", FLOAT64, default=0.0),
                                    Field("remove", BOOL, default=False),
                                    name="OpData",
                                )
                            ),
                        ),
                        name="EntryData",
                    )
                ),
            ),
            Field("validate_only", BOOL, default=False),
        ),
        response=Struct(
            THROTTLE,
            Field(
                "entries",
                Array(
                    Struct(
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        ENTITY,
                        name="EntryData",
                    )
                ),
                default=list,
            ),
        ),
    )
)
