"""Security (docs/security.md): SASL authentication ending in a principal on the connection
(sasl.py), the rate-limited authorizer log (auth_log.py). TLS itself is the network layer's
(client/security/tls.py builds the contexts)."""
