"""Server keys: identity, roles, listeners, network limits, topic defaults. One line per key."""

from __future__ import annotations

import re

from client.config.keydef import key
from client.config.types import (
    Validator,
    at_least,
    host_ports,
    http_listener,
    items_in,
    non_empty,
    protocol_map,
)

B = ("broker",)
C = ("controller",)
BC = ("broker", "controller")
ALL = ("broker", "controller", "producer", "consumer", "admin")
MiB = 1024 * 1024
INT_MAX = 2**31 - 1
_wire_protocols = Validator(lambda v: all(re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*:(GREGOR|KAFKA)", i, re.I) for i in v), "NAME:PROTOCOL[,...] with PROTOCOL GREGOR or KAFKA")  # fmt: skip
_optional_listeners = Validator(lambda v: len(v) == 0 or host_ports()(v) is None, "empty, or HOST:PORT[,...]")  # fmt: skip

STANDARD_AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
_authorizer = Validator(
    lambda v: v in ("", STANDARD_AUTHORIZER, "StandardAuthorizer"),
    f"empty (no authorization) or {STANDARD_AUTHORIZER} (ACLs; short form StandardAuthorizer)",
)

_endpoint_algorithm = Validator(
    lambda v: v in ("https", ""), "https, or empty (no host name check)"
)

KEYS = [
    key("process.roles", "list", ("broker", "controller"), "roles this process plays: broker, controller or both", BC, items_in(("broker", "controller"))),
    key("node.id", "int", 1, "this node's id, unique in the cluster (brokers and controllers)", BC, at_least(0)),
    key("cluster.id", "str", None, "cluster id, fixed once by the controller quorum in the metadata log (the first active controller's configured or stored id, else a new one) and stored by every node in `cluster.id` in its data dir; a node whose configured or stored id differs is refused with INCONSISTENT_CLUSTER_ID (docs/operations.md, Cluster id); unset: take the quorum's", BC),
    key("listeners", "list", ("127.0.0.1:9092",), "addresses the broker listens on: NAME://HOST:PORT (HOST:PORT is named PLAINTEXT), comma-separated, one name each; clients get the advertised addresses of the listener they connected on; port 0 picks a free port", B, host_ports()),
    key("advertised.listeners", "list", (), "addresses given to clients in metadata, per listener name (NAME://HOST:PORT; unnamed: PLAINTEXT); a listener not named here advertises the address it binds", B, _optional_listeners),
    key("listener.security.protocol.map", "list", ("PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"), "listener name -> security protocol (NAME:PROTOCOL, comma-separated), as Kafka; all four are built (TLS with ssl.certfile/ssl.keyfile, SASL with sasl.enabled.mechanisms: docs/security.md), on GREGOR and KAFKA listeners alike (listener.protocol.map); a name not in the map is PLAINTEXT, except those four names, which keep their own protocol; the controllers' listener is named by controller.listener.names", BC, protocol_map()),
    key("controller.listener.names", "list", ("CONTROLLER",), "the name of the controllers' listener (the addresses of controller.quorum.voters): its protocol in listener.security.protocol.map (PLAINTEXT when not mapped, or SSL) is what every controller serves and what brokers and controllers use to reach a controller; only the first name is used", BC, non_empty()),
    key("ssl.certfile", "str", None, "this node's certificate chain (PEM), served on every SSL listener (and the controllers' listener when it is SSL), and presented to other nodes when they ask for a client certificate; clients: the client certificate for mTLS", ALL),
    key("ssl.keyfile", "str", None, "the private key (PEM, unencrypted) of ssl.certfile; empty: the key is in ssl.certfile", ALL),
    key("ssl.cafile", "str", None, "CA certificates (PEM) trusted for the other side of a TLS link: a broker's or controller's certificate (clients, and nodes reaching each other), and client certificates when ssl.client.auth is requested or required; empty: the system's default CAs for outgoing links", ALL),
    key("ssl.client.auth", "enum", "none", "client certificates on TLS listeners: none, requested (checked against ssl.cafile when sent) or required (mTLS: the handshake fails without a valid one); the principal is the certificate subject, User:CN=...,OU=...", BC, choices=("none", "requested", "required")),
    key("ssl.endpoint.identification.algorithm", "str", "https", "https: an outgoing TLS link checks that the server certificate names the host connected to (Kafka's default); empty: no host name check (the certificate chain is still verified)", ALL, _endpoint_algorithm),
    key("sasl.enabled.mechanisms", "list", ("SCRAM-SHA-256", "SCRAM-SHA-512"), "SASL mechanisms a SASL_PLAINTEXT or SASL_SSL listener offers: SCRAM-SHA-256, SCRAM-SHA-512, PLAIN (checked against the same stored SCRAM keys; offered on SASL_PLAINTEXT only with sasl.plain.allow.without.tls)", B, items_in(("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN"))),
    key("sasl.plain.allow.without.tls", "bool", False, "offer PLAIN on SASL_PLAINTEXT listeners too, where the password crosses the network in clear (false: PLAIN only on SASL_SSL)", B),
    key("sasl.server.max.receive.size", "size", 512 * 1024, "largest frame a connection on a SASL listener may send before it has authenticated (Kafka's); bigger closes it", B, at_least(1024)),
    key("sasl.server.authentication.timeout.ms", "duration_ms", 10_000, "a connection on a SASL listener must finish authenticating within this long of being accepted, else it is closed", B, at_least(1)),
    key("connection.failed.authentication.delay.ms", "duration_ms", 100, "a failed authentication is answered (then the connection closed) only after this long, to slow password guessing (Kafka's)", B, at_least(0)),
    key("sasl.scram.bootstrap.file", "str", None, "the first users: a file of SCRAM credentials in the form of Kafka's kafka-storage --add-scram, one per line (SCRAM-SHA-512=[name=admin,password=SECRET]); the active controller writes them (salted keys only) when the metadata log has no SCRAM credential yet, and never again; read at start-up (a bad line stops it)", BC),
    key("sasl.mechanism.inter.broker.protocol", "enum", "SCRAM-SHA-512", "the SASL mechanism followers use to authenticate to leaders when inter.broker.listener.name is SASL_PLAINTEXT or SASL_SSL (Kafka's key)", B, choices=("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")),
    key("sasl.inter.broker.username", "str", None, "the SCRAM user this broker's followers authenticate as on a SASL inter-broker listener (Kafka puts it in listener.name.NAME.MECHANISM.sasl.jaas.config)", B),
    key("authorizer.class.name", "str", "", f"authorization by ACLs (docs/security.md, Authorization): {STANDARD_AUTHORIZER} (Kafka's name; StandardAuthorizer for short) checks every request against the ACLs in the metadata log; empty: no authorization, every connected principal may do everything and the ACL APIs answer SECURITY_DISABLED", B, _authorizer),
    key("super.users", "str", "", "principals allowed everything whatever the ACLs say, separated by ';' as in Kafka (User:admin;User:CN=broker-1); give the inter-broker principal here (or ACLs for CLUSTER_ACTION on the cluster), there is no bypass for brokers", B),
    key("allow.everyone.if.no.acl.found", "bool", False, "with authorizer.class.name set: a resource that no ACL names is open to every principal (Kafka's key; false: only super.users may touch it)", B),
    key("sasl.inter.broker.password", "str", None, "the password of sasl.inter.broker.username", B),
    key("listener.protocol.map", "list", ("KAFKA:KAFKA",), "listener name -> wire protocol (NAME:PROTOCOL, comma-separated): GREGOR (the native protocol, Gregor's clients and replication) or KAFKA (Apache Kafka's protocol, for Kafka clients such as kcat and librdkafka; docs/kafka-compat.md); a name not in the map speaks GREGOR; every listener serves the same topics, offsets and producer state; inter.broker.listener.name must be a GREGOR listener", B, _wire_protocols),
    key("inter.broker.listener.name", "str", None, "the listener whose advertised address other brokers fetch from (replication); empty: the first of listeners", B),
    key("broker.rack", "str", None, "rack of this broker, for rack-aware replica placement", B),
    key("log.dirs", "list", ("./gregor-data",), "data directories for partition logs, comma-separated", B, non_empty()),
    key("log.level", "enum", "INFO", "logging level of the process", BC, choices=("DEBUG", "INFO", "WARNING", "ERROR")),
    key("num.network.threads", "int", 2, "network (selector) threads accepting and framing requests (2: measured best with 4 I/O threads on 2 cores, see docs/broker.md)", B, at_least(1)),
    key("num.io.threads", "int", 4, "I/O handler threads executing requests (4: 1 loses ~25% on 1 KiB produce, more only adds GIL contention; docs/broker.md)", B, at_least(1)),
    key("queued.max.requests", "int", 500, "requests queued for the I/O threads before the network threads stop reading", B, at_least(1)),
    key("socket.request.max.bytes", "size", 100 * MiB, "largest request frame accepted; bigger frames close the connection", B, at_least(64)),
    key("queued.max.request.bytes", "size", 100 * MiB, "bytes of requests being received (large frames, as they grow) and not yet answered, across the broker; past it connections needing more stop reading until memory frees (small requests are counted, never held back)", B, at_least(64 * 1024)),
    key("socket.request.receive.timeout.ms", "duration_ms", 30_000, "a request frame must arrive whole within this long of its first byte (time the broker itself is not reading excluded); slower connections are closed", B, at_least(1)),
    key("connections.max.idle.ms", "duration_ms", 600_000, "idle connections are closed after this long", ("broker", "producer", "consumer", "admin"), at_least(1)),
    key("quota.window.num", "int", 11, "client quotas: how many sampled windows a client's rate is measured over (Kafka's; docs/security.md, Quotas)", B, at_least(2)),
    key("quota.window.size.seconds", "int", 1, "client quotas: the length of one sampled window", B, at_least(1)),
    key("max.connections", "int", INT_MAX, "open client connections per broker; past it new ones are closed at once (a warning at most every 10 s)", B, at_least(1)),
    key("controlled.shutdown.timeout.ms", "duration_ms", 4000, "how long a stopping broker (SIGTERM) waits for the controller to move its leadership off and fence it; past it, or with no controller reachable, it stops without (one WARNING line says why) and is fenced after broker.session.timeout.ms (Kafka's ZK-era brokers bounded this by controlled.shutdown.max.retries)", B, at_least(1)),
    key("auto.create.topics.enable", "bool", True, "create a topic when a client asks for metadata of an unknown one", BC),
    key("delete.topic.enable", "bool", True, "allow DeleteTopics", BC),
    key("num.partitions", "int", 1, "partitions of an auto-created (or -1 partitions) topic", BC, at_least(1)),
    key("default.replication.factor", "int", 1, "replication factor of an auto-created (or -1) topic", BC, at_least(1)),
    key("message.max.bytes", "size", 1024 * 1024 + 12, "largest record batch the broker accepts", BC, at_least(61)),
    key("fetch.max.bytes", "size", 50 * MiB, "most bytes returned by one fetch response (broker cap and consumer request)", ("broker", "consumer"), at_least(1)),
    key("metrics.listener", "str", None, "where this node serves Prometheus metrics (/metrics) and its health checks (/health/live, /health/ready): http://HOST:PORT on a listener of its own, answered on a thread of its own off the request path (docs/metrics.md); port 0 picks a free port; empty: off", BC, http_listener()),
    key("metrics.partition.labels", "bool", False, "per-partition series (a `partition` label beside `topic`) for the per-topic metrics: bytes and records in and out, log size, followers' lag, group lag; false: one series per topic (a broker with thousands of partitions would otherwise serve thousands of series per metric)", B),
]  # fmt: skip
