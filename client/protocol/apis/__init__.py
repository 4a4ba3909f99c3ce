"""One module per API family; importing this package registers every schema."""

from client.protocol.apis import controller, core  # noqa: F401
