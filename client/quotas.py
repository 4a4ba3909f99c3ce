"""Client quotas: the names every process shares (Kafka's), entity checks, and the order in
which a (user, client id) pair finds its quota.

An entity is a tuple of (entity type, name) pairs sorted by type, with the types "user" and
"client-id"; a name None is that type's default entity (Kafka's `<default>`). So

    (("user", "alice"),)                          user alice, whatever client id
    (("client-id", "etl"), ("user", None))        client etl of any user without its own
    (("client-id", None),)                        every client id without a quota of its own

`resolution_order` lists the entities a connection's quota is looked up in, most specific first
(Kafka's ClientQuotaManager order); the first one that sets a key wins, and the quota is shared
by every connection the winning entity covers (`sensor_tags`). Pure: any thread may call.
"""

from __future__ import annotations

from collections.abc import Mapping

USER = "user"
CLIENT_ID = "client-id"
ENTITY_TYPES = (CLIENT_ID, USER)  # sorted: an entity's pairs are in this order

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)

Entity = tuple[tuple[str, "str | None"], ...]


def make_entity(parts: Mapping[str, str | None]) -> Entity:
    """{type: name or None} → the entity tuple (sorted by type). ValueError: an unknown type or
    no type at all."""
    if not parts:
        raise ValueError("a quota entity names a user, a client id or both")
    for t in parts:
        if t not in ENTITY_TYPES:
            raise ValueError(
                f"unknown quota entity type {t!r} (expected {USER!r} or {CLIENT_ID!r})"
            )
    return tuple(sorted(parts.items()))


def check_value(key: str, value: float) -> str | None:
    """Why `value` cannot be quota `key` (None: it can)."""
    if key not in QUOTA_KEYS:
        return f"unknown quota key {key!r} (expected {', '.join(QUOTA_KEYS)})"
    if value != value or value in (float("inf"), float("-inf")):
        return f"{key}={value}: expected a finite number"
    if value <= 0:
        return f"{key}={value}: expected a positive number"
    if key != REQUEST_PERCENTAGE and value != int(value):
        return f"{key}={value}: expected a whole number of bytes per second"
    return None


def describe_entity(entity: Entity) -> str:
    """`user=alice, client-id=<default>`, for messages and the CLI."""
    return ", ".join(f"{t}={'<default>' if n is None else n}" for t, n in entity)


def resolution_order(user: str, client_id: str) -> list[tuple[Entity, Entity]]:
    """The entities a connection of `user` (the principal's name) with `client_id` takes its
    quota from, most specific first, each with the sensor tags it implies (see sensor_tags):

        user + client-id, user + default client-id, user,
        default user + client-id, default user + default client-id, default user,
        client-id, default client-id
    """
    order: list[Entity] = [
        ((CLIENT_ID, client_id), (USER, user)),
        ((CLIENT_ID, None), (USER, user)),
        ((USER, user),),
        ((CLIENT_ID, client_id), (USER, None)),
        ((CLIENT_ID, None), (USER, None)),
        ((USER, None),),
        ((CLIENT_ID, client_id),),
        ((CLIENT_ID, None),),
    ]
    return [(e, sensor_tags(e, user, client_id)) for e in order]


def sensor_tags(entity: Entity, user: str, client_id: str) -> Entity:
    """Which connections share one quota: the configured entity with each default replaced by
    the connection's own name (a default-user quota applies to each user separately; a quota
    of user alice is shared by all of alice's client ids)."""
    return tuple((t, user if t == USER else client_id) for t, _ in entity)


def quota_for(
    quotas: Mapping[Entity, Mapping[str, float]], key: str, user: str, client_id: str
) -> tuple[float, Entity] | None:
    """(quota `key` of the most specific entity setting it, the sensor tags), or None: no
    quota of that key applies to this user and client id."""
    for entity, tags in resolution_order(user, client_id):
        values = quotas.get(entity)
        if values is not None and key in values:
            return values[key], tags
    return None
