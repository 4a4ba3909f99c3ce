"""Client keys (producer, consumer, admin), with Kafka's names and defaults. One line per key."""

from __future__ import annotations

from client.config.keydef import IGNORED, REFUSED, key
from client.config.types import at_least, host_ports, in_range

P = ("producer",)
CO = ("consumer",)
A = ("admin",)
PCA = ("producer", "consumer", "admin")
CA = ("consumer", "admin")
MiB = 1024 * 1024

KEYS = [
    key("bootstrap.servers", "list", ("localhost:9092",), "brokers to contact first: HOST:PORT, comma-separated", PCA, host_ports()),
    key("security.protocol", "enum", "PLAINTEXT", "protocol to talk to brokers with (Kafka's name): PLAINTEXT, SSL (TLS: ssl.cafile, ssl.certfile, ssl.keyfile, ssl.endpoint.identification.algorithm), SASL_PLAINTEXT or SASL_SSL (sasl.mechanism, sasl.username, sasl.password)", PCA, choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")),
    key("sasl.mechanism", "enum", "SCRAM-SHA-512", "SASL mechanism with security.protocol SASL_PLAINTEXT or SASL_SSL: SCRAM-SHA-256, SCRAM-SHA-512 or PLAIN (the broker offers PLAIN only over TLS unless told otherwise)", PCA, choices=("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")),
    key("sasl.username", "str", None, "the user name to authenticate as (librdkafka's key; Kafka's Java client puts it in sasl.jaas.config)", PCA),
    key("sasl.password", "str", None, "the user's password (never sent in clear with SCRAM; PLAIN sends it, so only over TLS)", PCA),
    key("client.id", "str", None, "name sent with every request (logs, quotas); default gregor-ROLE-PID-N", PCA),
    key("request.timeout.ms", "duration_ms", 30_000, "how long to wait for any response", PCA, at_least(1)),
    key("default.api.timeout.ms", "duration_ms", 60_000, "timeout of blocking calls without their own timeout", CA, at_least(1), status=IGNORED, why='blocking calls take their own timeout or request.timeout.ms'),
    key("metadata.max.age.ms", "duration_ms", 300_000, "refresh metadata at least this often", PCA, at_least(0)),
    key("retry.backoff.ms", "duration_ms", 100, "wait before retrying a failed request", PCA, at_least(0)),
    key("reconnect.backoff.ms", "duration_ms", 50, "first wait before reconnecting to a broker", PCA, at_least(0)),
    key("reconnect.backoff.max.ms", "duration_ms", 1000, "longest wait before reconnecting", PCA, at_least(0)),
    key("socket.connection.setup.timeout.ms", "duration_ms", 10_000, "TCP connect timeout", PCA, at_least(1)),
    key("max.in.flight.requests.per.connection", "int", 5, "pipelined requests per connection before the sender waits", PCA, at_least(1)),
    key("max.response.bytes", "size", 100 * MiB, "largest response frame the client accepts", PCA, at_least(1024)),
    key("acks", "enum", "all", "replicas that must have a record before it is acknowledged: all (-1), 1 or 0", P, choices=("all", "-1", "0", "1")),
    key("linger.ms", "duration_ms", 5, "wait this long for more records before sending a batch", P, at_least(0)),
    key("batch.size", "size", 16_384, "target bytes per partition batch", P, at_least(1)),
    key("compression.type", "enum", "none", "compression of produced batches", P, choices=("none", "gzip", "lz4", "zstd")),
    key("retries", "int", 2**31 - 1, "retries of a batch failing with a retriable error (bounded by delivery.timeout.ms)", P, at_least(0)),
    key("delivery.timeout.ms", "duration_ms", 120_000, "give up on a record this long after send()", P, at_least(1)),
    key("buffer.memory", "size", 32 * MiB, "bytes of unsent records before send() blocks", P, at_least(1024)),
    key("max.block.ms", "duration_ms", 60_000, "how long send() blocks for buffer space or metadata", P, at_least(0)),
    key("max.request.size", "size", 1 * MiB, "largest Produce request per partition", P, at_least(1024)),
    key("allow.auto.create.topics", "bool", True, "let the broker create a missing topic on the producer's metadata request (when its auto.create.topics.enable is set)", P),
    key("enable.idempotence", "bool", True, "producer ids and sequence numbers: a retried batch is stored once (needs acks=all, retries > 0, max.in.flight <= 5; left at its default, a conflicting setting turns it off)", P),
    key("transactional.id", "str", None, "makes the producer transactional (init_transactions(), begin/commit/abort_transaction()); implies enable.idempotence=true; a new producer with the same id fences the old one", P),
    key("transaction.timeout.ms", "duration_ms", 60_000, "the coordinator aborts a transaction open longer than this (sent in InitProducerId; at most the broker's transaction.max.timeout.ms)", P, in_range(1, 2**31 - 1)),
    key("group.id", "str", None, "consumer group to join (subscribe() then gets the partitions the group's coordinator assigns; commits go to the group); None: no group (subscribe() reads every partition, nothing is committed)", CO),
    key("group.instance.id", "str", None, "static membership: close() leaves the group keeping this instance's partitions until its session timeout, and a consumer restarted with the same id within it gets them back without a rebalance", CO),
    key("group.protocol", "enum", "consumer", "consumer group protocol (Kafka's name; Kafka's default is classic): Gregor's groups always use the consumer protocol of KIP-848", CO, choices=("classic", "consumer"), status=REFUSED, why="the classic protocol (JoinGroup/SyncGroup, client-side assignors) is not built: groups use KIP-848's consumer protocol, the coordinator assigns partitions (pick its assignor with group.remote.assignor); drop the setting or set consumer"),
    key("group.remote.assignor", "enum", None, "server-side assignor the group uses (uniform or range; None: the coordinator's default, uniform)", CO, choices=("uniform", "range")),
    key("auto.offset.reset", "enum", "earliest", "where to start without a committed offset (Kafka's default: latest)", CO, choices=("earliest", "latest", "none")),
    key("enable.auto.commit", "bool", True, "with a group.id: commit the positions of the records poll() returned, every auto.commit.interval.ms from poll(), before partitions are revoked, and on close()", CO),
    key("auto.commit.interval.ms", "duration_ms", 5000, "how often offsets are auto-committed", CO, at_least(0)),
    key("fetch.min.bytes", "size", 1, "a fetch waits for at least this many bytes", CO, at_least(0)),
    key("fetch.max.wait.ms", "duration_ms", 500, "... or at most this long", CO, at_least(0)),
    key("max.partition.fetch.bytes", "size", 1 * MiB, "bytes per partition per fetch", CO, at_least(1)),
    key("max.poll.records", "int", 500, "records returned by one poll()", CO, at_least(1)),
    key("max.poll.interval.ms", "duration_ms", 300_000, "with a group: a member that does not call poll() for this long leaves the group (its partitions go to the others, its commits are refused; the next poll() calls on_lost and rejoins); also how long it may take to revoke partitions", CO, at_least(1)),
    key("fetch.buffer.bytes", "size", 64 * MiB, "fetched-but-unpolled bytes before prefetching pauses", CO, at_least(1024)),
    key("isolation.level", "enum", "read_uncommitted", "read_committed hides records of open or aborted transactions", CO, choices=("read_uncommitted", "read_committed")),
    key("check.crcs", "bool", True, "verify each fetched batch's CRC-32C", CO),
    key("session.timeout.ms", "duration_ms", None, "the group drops a member silent for this long (None: the broker's group.consumer.session.timeout.ms; else within its group.min/max.session.timeout.ms)", CO, at_least(1)),
    key("heartbeat.interval.ms", "duration_ms", 3000, "how often the consumer heartbeats to its group coordinator", CO, at_least(1), status=REFUSED, why="the group coordinator sets the interval (KIP-848: the broker's group.consumer.heartbeat.interval.ms)"),
    key("partition.assignment.strategy", "list", ("range",), "assignors, in order of preference (range, roundrobin, sticky)", CO, None, status=REFUSED, why='client-side assignment (the classic rebalance protocol) is not built: the coordinator assigns (KIP-848); choose its assignor with group.remote.assignor'),
]  # fmt: skip
