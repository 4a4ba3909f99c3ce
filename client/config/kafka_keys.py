"""Kafka config keys Gregor does not have, and what Gregor does instead.

An unknown key that Kafka knows gets this explanation instead of a bare "unknown config key":
someone porting a Kafka config learns that the key is Kafka's, why Gregor has no such setting,
and what to do. `explain(name)` looks a name up (dotted or snake_case; whole names first, then
the prefixes of families such as `ssl.*`). Keys Gregor does have but has not built yet
(`group.protocol=classic`, `security.protocol=SSL`...) are in the registry
with a "not yet" status instead, so their Gregor-compatible values keep working.

Pure data; any thread may read.
"""

from __future__ import annotations

_TLS = (
    "Gregor's TLS reads PEM files, not Java keystores: ssl.certfile (certificate chain),"
    " ssl.keyfile (its key), ssl.cafile (trusted CAs), ssl.client.auth and"
    " ssl.endpoint.identification.algorithm (docs/security.md)"
)
_QUOTAS = (
    "client quotas are metadata, not config keys: gregor quotas set --client-id-default"
    " --producer-byte-rate N (or Admin.alter_client_quotas; docs/security.md, Quotas)"
)
_SASL = (
    "Gregor's SASL is SCRAM-SHA-256/512 and PLAIN against credentials in the metadata log:"
    " clients set sasl.mechanism, sasl.username and sasl.password; brokers"
    " sasl.enabled.mechanisms (docs/security.md); no JAAS, Kerberos or OAuth"
)
_METRICS = (
    "Gregor has no metrics reporters or JMX: a node serves Prometheus metrics on"
    " metrics.listener (docs/metrics.md); leave it out"
)
_CLASSES = "Gregor loads no plug-in classes by name"
_SOCKET_BUFFERS = (
    "Gregor uses the operating system's socket buffer sizes (net.core.*mem); leave it out"
)

# Whole names (dotted). The explanation completes "'NAME' is a Kafka key that Gregor does not
# have: ...".
KAFKA_KEYS: dict[str, str] = {
    # clients
    "key.serializer": "a producer takes a callable as key_serializer (keys that are bytes, str or None need none); class names are not loaded",
    "value.serializer": "a producer takes a callable as value_serializer (values that are bytes, str or None need none); class names are not loaded",
    "key.deserializer": "a consumer takes a callable as key_deserializer (without one, keys are bytes); class names are not loaded",
    "value.deserializer": "a consumer takes a callable as value_deserializer (without one, values are bytes); class names are not loaded",
    "interceptor.classes": f"{_CLASSES}: wrap send() / poll() in your own function instead",
    "partitioner.class": (
        f"{_CLASSES}: records with a key go to murmur2(key) % partitions, keyless ones stick to"
        " a partition until its batch fills (Kafka's default); pick a partition yourself with"
        " send(topic, value, partition=N)"
    ),
    "partitioner.ignore.keys": "keyed records always go to murmur2(key) % partitions; choose a partition with send(..., partition=N)",
    "partitioner.adaptive.partitioning.enable": "keyless records stick to one partition until its batch fills, without adaptive weighting",
    "partitioner.availability.timeout.ms": "keyless records stick to one partition until its batch fills, without adaptive weighting",
    "client.dns.lookup": "bootstrap and broker host names are resolved by the operating system's resolver; the lookup is not configurable",
    "client.rack": "consumers always fetch from the leader (follower fetching, KIP-392, is not built)",
    "send.buffer.bytes": _SOCKET_BUFFERS,
    "receive.buffer.bytes": _SOCKET_BUFFERS,
    "socket.send.buffer.bytes": _SOCKET_BUFFERS,
    "socket.receive.buffer.bytes": _SOCKET_BUFFERS,
    "socket.connection.setup.timeout.max.ms": "a connect times out after socket.connection.setup.timeout.ms; set that one",
    "retry.backoff.max.ms": "retries wait retry.backoff.ms; set that one",
    "metadata.max.idle.ms": "metadata is refreshed every metadata.max.age.ms; set that one",
    "exclude.internal.topics": "not configurable: write a subscription pattern that does not match names starting with '__' (such as __consumer_offsets)",
    "metric.reporters": _METRICS,
    "auto.include.jmx.reporter": _METRICS,
    "enable.metrics.push": _METRICS,
    "compression.gzip.level": "compression uses each codec's default level",
    "compression.lz4.level": "compression uses each codec's default level",
    "compression.zstd.level": "compression uses each codec's default level",
    "group.consumer.assignor": "pick the server-side assignor with group.remote.assignor (uniform or range)",
    "internal.leave.group.on.close": "close() leaves the group, unless group.instance.id is set (static membership)",
    # brokers
    "zookeeper.connect": "there is no ZooKeeper: metadata lives in the Raft controller quorum (controller.quorum.voters)",
    "security.inter.broker.protocol": "brokers replicate over inter.broker.listener.name, with that listener's protocol in listener.security.protocol.map (SSL: TLS)",
    "log.dir": "Gregor's key is log.dirs (one or more directories, comma-separated)",
    "log.message.format.version": "there is one record batch format (Kafka's v2 layout, docs/record-format.md)",
    "inter.broker.protocol.version": "every Gregor process of a cluster runs the same version; there is no protocol pinning",
    "num.replica.alter.log.dirs.threads": "replicas do not move between log dirs (not built)",
    "log.cleaner.io.max.bytes.per.second": "the log cleaner is not throttled",
    "quota.producer.default": _QUOTAS,
    "quota.consumer.default": _QUOTAS,
    "client.quota.callback.class": "the quota of a client is resolved as Kafka's default callback does (docs/security.md, Quotas); no plug-in",
    "follower.replication.throttled.rate": "a dynamic broker config, not a file key: gregor partitions reassign --execute --throttle, or Admin.incremental_alter_configs({('broker', ''): {...}}) (docs/operations.md, 'Growing and shrinking a cluster')",
    "leader.replication.throttled.rate": "reassignments are throttled on the follower side: follower.replication.throttled.rate, a dynamic broker config (gregor partitions reassign --throttle)",
    "leader.replication.throttled.replicas": "the replicas a reassignment adds are the throttled ones; nothing to list",
    "follower.replication.throttled.replicas": "the replicas a reassignment adds are the throttled ones; nothing to list",
    "replica.selector.class": "consumers always fetch from the leader (follower fetching, KIP-392, is not built)",
    "remote.log.storage.system.enable": "tiered storage is not built: logs stay in log.dirs",
    "transaction.state.log.min.isr": "__transaction_state takes the broker's min.insync.replicas, as every topic created without it",
    "transaction.state.log.load.buffer.size": "__transaction_state is loaded in reads of 1 MiB; not configurable",
    "transaction.partition.verification.enable": "partitions are not verified against the coordinator before a transactional write (KIP-890 is not built)",
    "confluent.support.metrics.enable": _METRICS,
    "metrics.num.samples": _METRICS,
    "metrics.recording.level": _METRICS,
    "metrics.sample.window.ms": _METRICS,
    "ssl.protocol": "TLS 1.2 or later, negotiated by OpenSSL (Python's ssl); not configurable",
    "ssl.enabled.protocols": "TLS 1.2 or later, negotiated by OpenSSL (Python's ssl); not configurable",
    "ssl.cipher.suites": "OpenSSL's default cipher suites for TLS 1.2+ (Python's ssl); not configurable",
    "ssl.principal.mapping.rules": "the principal is the certificate subject as written (User:CN=...,O=...), Kafka's DEFAULT rule; no other rules",
    "ssl.provider": _TLS,
    "ssl.engine.factory.class": f"{_CLASSES}; {_TLS}",
    "ssl.secure.random.implementation": "OpenSSL's random source (Python's ssl); not configurable",
}  # fmt: skip

# Families, by prefix (dotted, ending in '.').
KAFKA_PREFIXES: dict[str, str] = {
    "ssl.keystore.": _TLS,
    "ssl.truststore.": _TLS,
    "ssl.key.": _TLS,
    "ssl.keymanager.": _TLS,
    "ssl.trustmanager.": _TLS,
    "sasl.jaas.": _SASL,
    "sasl.kerberos.": _SASL,
    "sasl.login.": _SASL,
    "sasl.oauthbearer.": _SASL,
    "sasl.client.": _SASL,
    "sasl.server.callback.": _SASL,
    "sasl.mechanism.controller.": _SASL,
    "listener.name.": "per-listener settings are not built: every TLS listener (and the controllers') uses the node's ssl.* keys",
    "metrics.context.": _METRICS,  # (not "metrics.": metrics.listener is Gregor's own)
    "metrics.jmx.": _METRICS,
    "confluent.": "Confluent Platform keys have no Gregor twin",
    "remote.log.": "tiered storage is not built: logs stay in log.dirs",
}


def _dotted(name: str) -> str:
    return name.replace("_", ".").lower() if "." not in name else name.lower()


def explain(name: str) -> str | None:
    """What Gregor does instead of Kafka key `name` (dotted or snake_case), or None if `name`
    is not a Kafka key this table knows."""
    dotted = _dotted(name)
    if dotted in KAFKA_KEYS:
        return KAFKA_KEYS[dotted]
    for prefix, why in KAFKA_PREFIXES.items():
        if dotted.startswith(prefix):
            return why
    return None
