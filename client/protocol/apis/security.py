"""Security APIs: SaslHandshake (17), SaslAuthenticate (36), DescribeUserScramCredentials (50),
AlterUserScramCredentials (51), with Kafka's numbers and fields (docs/security.md).

On a SASL listener a connection may send only ApiVersions, SaslHandshake and SaslAuthenticate
until SaslAuthenticate succeeds. SCRAM takes two SaslAuthenticate round trips (client-first,
client-final), PLAIN one. Credentials travel as salted passwords (the client salts and
iterates), and are stored as StoredKey/ServerKey only.
"""

from __future__ import annotations

from client.protocol.api_keys import ApiKey
from client.protocol.apis.data import THROTTLE
from client.protocol.schema import (
    BYTES,
    INT8,
    INT16,
    INT32,
    INT64,
    STRING,
    ApiSpec,
    Array,
    Field,
    Nullable,
    Struct,
    register,
)

ERROR_MESSAGE = Field("error_message", Nullable(STRING), default=None)

SASL_HANDSHAKE = register(
    ApiSpec(
        key=ApiKey.SASL_HANDSHAKE,
        name="SaslHandshake",
        doc="Choose the SASL mechanism of this connection. An unsupported one gets "
        "UNSUPPORTED_SASL_MECHANISM with the listener's `mechanisms`; a second handshake, "
        "or one on a listener without SASL, gets ILLEGAL_SASL_STATE.",
        request=Struct(Field("mechanism", STRING)),
        response=Struct(
            Field("error_code", INT16),
            Field("mechanisms", Array(STRING), default=list),
        ),
    )
)

SASL_AUTHENTICATE = register(
    ApiSpec(
        key=ApiKey.SASL_AUTHENTICATE,
        name="SaslAuthenticate",
        doc="One step of the chosen mechanism. A failure is SASL_AUTHENTICATION_FAILED with "
        "the same message whether the user exists or not, sent after "
        "connection.failed.authentication.delay.ms; the broker then closes the connection.",
        request=Struct(Field("auth_bytes", BYTES)),
        response=Struct(
            Field("error_code", INT16),
            ERROR_MESSAGE,
            Field("auth_bytes", BYTES, default=b""),
            Field("session_lifetime_ms", INT64, default=0),
        ),
    )
)

DESCRIBE_USER_SCRAM_CREDENTIALS = register(
    ApiSpec(
        key=ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        name="DescribeUserScramCredentials",
        doc="Which SCRAM mechanisms (1 SCRAM-SHA-256, 2 SCRAM-SHA-512) and iteration counts "
        "each user has; never a key or salt. `users` nil or empty: every user. An unknown "
        "user gets RESOURCE_NOT_FOUND, one named twice DUPLICATE_RESOURCE.",
        request=Struct(
            Field(
                "users",
                Nullable(Array(Struct(Field("name", STRING), name="UserName"))),
                default=None,
            )
        ),
        response=Struct(
            THROTTLE,
            Field("error_code", INT16, default=0),
            ERROR_MESSAGE,
            Field(
                "results",
                Array(
                    Struct(
                        Field("user", STRING),
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        Field(
                            "credential_infos",
                            Array(
                                Struct(
                                    Field("mechanism", INT8),
                                    Field("iterations", INT32),
                                    name="CredentialInfo",
                                )
                            ),
                            default=list,
                        ),
                        name="DescribeUserScramCredentialsResult",
                    )
                ),
                default=list,
            ),
        ),
    )
)

ALTER_USER_SCRAM_CREDENTIALS = register(
    ApiSpec(
        key=ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        name="AlterUserScramCredentials",
        doc="Delete (name, mechanism) credentials and upsert (name, mechanism, iterations, "
        "salt, salted_password) ones; the controller stores StoredKey and ServerKey derived "
        "from the salted password, never the password. Per user: UNSUPPORTED_SASL_MECHANISM, "
        "UNACCEPTABLE_CREDENTIAL (empty name, iterations outside 4096..16384, empty salt or "
        "salted password), RESOURCE_NOT_FOUND (deleting what does not exist), "
        "DUPLICATE_RESOURCE (a user and mechanism named twice).",
        request=Struct(
            Field(
                "deletions",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("mechanism", INT8),
                        name="ScramCredentialDeletion",
                    )
                ),
                default=list,
            ),
            Field(
                "upsertions",
                Array(
                    Struct(
                        Field("name", STRING),
                        Field("mechanism", INT8),
                        Field("iterations", INT32),
                        Field("salt", BYTES),
                        Field("salted_password", BYTES),
                        name="ScramCredentialUpsertion",
                    )
                ),
                default=list,
            ),
        ),
        response=Struct(
            THROTTLE,
            Field(
                "results",
                Array(
                    Struct(
                        Field("user", STRING),
                        Field("error_code", INT16),
                        ERROR_MESSAGE,
                        name="AlterUserScramCredentialsResult",
                    )
                ),
                default=list,
            ),
        ),
    )
)
