"""One module per API family; importing this package registers every schema."""

from client.protocol.apis import admin, controller, core, data, groups, security  # noqa: F401
