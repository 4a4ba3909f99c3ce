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

KEYS = [
    key("process.roles", "list", ("broker", "controller"), "roles this process plays: broker, controller or both", BC, items_in(("broker", "controller"))),
    key("node.id", "int", 1, "this node's id, unique in the cluster (brokers and controllers)", BC, at_least(0)),
    key("cluster.id", "str", None, "cluster id, fixed once by the controller quorum in the metadata log (the first active controller's configured or stored id, else a new one) and stored by every node in `cluster.id` in its data dir; a node whose configured or stored id differs is refused with INCONSISTENT_CLUSTER_ID (docs/operations.md, Cluster id); unset: take the quorum's", BC),
    key("listeners", "list", ("127.0.0.1:9092",), "addresses the broker listens on: NAME://HOST:PORT (HOST:PORT is named PLAINTEXT), comma-separated, one name each; clients get the advertised addresses of the listener they connected on; port 0 picks a free port", B, host_ports()),
    key("advertised.listeners", "list", (), "addresses given to clients in metadata, per listener name (NAME://HOST:PORT; unnamed: PLAINTEXT); a listener not named here advertises the address it binds", B, _optional_listeners),
    key("listener.security.protocol.map", "list", ("PLAINTEXT:PLAINTEXT", "SSL:SSL", "SASL_PLAINTEXT:SASL_PLAINTEXT", "SASL_SSL:SASL_SSL"), "listener name -> security protocol (NAME:PROTOCOL, comma-separated), as Kafka; only PLAINTEXT is built, so a listener mapped to SSL, SASL_PLAINTEXT or SASL_SSL stops start-up (TLS and SASL are not built yet); a name not in the map is PLAINTEXT, except those four names, which keep their own protocol", B, protocol_map()),
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
    key("max.connections", "int", INT_MAX, "open client connections per broker; past it new ones are closed at once (a warning at most every 10 s)", B, at_least(1)),
    key("controlled.shutdown.timeout.ms", "duration_ms", 4000, "how long a stopping broker (SIGTERM) waits for the controller to move its leadership off and fence it; past it, or with no controller reachable, it stops without (one WARNING line says why) and is fenced after broker.session.timeout.ms (Kafka's ZK-era brokers bounded this by controlled.shutdown.max.retries)", B, at_least(1)),
    key("auto.create.topics.enable", "bool", True, "create a topic when a client asks for metadata of an unknown one", BC),
    key("delete.topic.enable", "bool", True, "allow DeleteTopics", BC),
    key("num.partitions", "int", 1, "partitions of an auto-created (or -1 partitions) topic", BC, at_least(1)),
    key("default.replication.factor", "int", 1, "replication factor of an auto-created (or -1) topic", BC, at_least(1)),
    key("message.max.bytes", "size", 1024 * 1024 + 12, "largest record batch the broker accepts", BC, at_least(61)),
    key("fetch.max.bytes", "size", 50 * MiB, "most bytes returned by one fetch response (broker cap and consumer request)", ("broker", "consumer"), at_least(1)),
    key("metrics.listener", "str", None, "where this node serves Prometheus metrics (/metrics) and its health checks (/health/live, /health/ready): http://HOST:PORT on a listener of its own, answered on a thread of its own off the request path (docs/metrics.md); port 0 picks a free port; empty: off", BC, http_listener()),
]  # fmt: skip
