"""One module per API family; importing this package registers every schema."""

from client.protocol.apis import (  # noqa: F401
    acls,
    admin,
    controller,
    core,
    data,
    groups,
    quorum,
    quotas,
    reassignments,
    security,
    txn_coordinator,
    txn_markers,
)
