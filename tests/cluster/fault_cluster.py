"""The system under test of the fault harness (CHECKER.md): 3 `gregor controller` + 3 `gregor
broker` processes with the scaled-down timeouts, one topic of 3 partitions (RF 3, min ISR 2,
unclean election off), and the questions the nemesis and the checks ask of it: who leads a
partition, who leads the quorum, is every partition healthy, does it take a probe write (C7).

`secure`: SASL_SSL on every link a client or broker uses (clients and replication
authenticate with SCRAM-SHA-512), SSL with client certificates required on the controllers'
links (brokers and controllers present certificates from the run's own CA: `gregor cluster up
--secure`'s files, broker/security/secure_setup.py); `client()` gives every client of the
harness the settings it needs.

Every process is started in its own session (with a gid of its own for network faults,
fault_net.py) and killed by `close()`, also when the scenario failed.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from broker_cluster import Brokers
from controller_quorum import HOST, ControllerQuorum
from fault_net import NODE_GID_BASE, Endpoint
from fault_workload import log_order
from helpers import wait_until

from client import Admin, Producer
from client.errors import GregorError, TopicAlreadyExistsError
from client.security.tls import TlsSettings, client_context

TOPIC = "chaos"
PARTITIONS = 3
MIN_ISR = 2
BROKERS = (4, 5, 6)


class Cluster:
    def __init__(
        self,
        workdir: Path,
        broker_overrides: dict[str, Any] | None = None,
        data_root: Path | None = None,
        broker_data: dict[int, Path] | None = None,
        own_gids: bool = False,
        partitions: int = PARTITIONS,
        secure: bool = False,
        spare_brokers: tuple[int, ...] = (),
        controller_overrides: dict[str, Any] | None = None,
        kafka: bool = False,
    ) -> None:
        """`data_root`: every node's data dir under it (default: under `workdir`);
        `broker_data`: a broker's log dir somewhere else still (e.g. a small disk);
        `own_gids`: each node runs with a gid of its own (network faults, fault_net.py);
        `partitions`: of the topic (PARTITIONS unless a scenario asks for more);
        `spare_brokers`: configured too, but started by the scenario (a broker that joins);
        `kafka`: each broker also has a KAFKA listener (`kafka_bootstrap`: the transactional
        workload, fault_txn.py)."""
        self.workdir = workdir
        self.topic = TOPIC
        self.partition_count = partitions
        self.broker_ids = list(BROKERS) + list(spare_brokers)
        root = data_root or workdir
        controller_keys: dict[str, Any] = {}
        broker_keys: dict[str, Any] = {}
        self.security: dict[str, Any] = {}  # the clients' settings (none: PLAINTEXT)
        if secure:
            controller_keys, broker_keys, harness = _secure_keys(workdir / "secure")
        self.quorum = ControllerQuorum(
            workdir / "quorum",
            3,
            data_root=root / "quorum",
            **{
                "broker.session.timeout.ms": 2500,
                "controller.quorum.election.timeout.ms": 500,
                **controller_keys,
                **(controller_overrides or {}),
            },
        )
        if secure:
            self.quorum.tls = client_context(
                TlsSettings(
                    cafile=harness["ssl_cafile"],
                    certfile=harness["ssl_certfile"],
                    keyfile=harness["ssl_keyfile"],
                )
            )
            # (brokers ask no certificate of clients: SASL authenticates them)
            self.security = {
                k: v for k, v in harness.items() if k not in ("ssl_certfile", "ssl_keyfile")
            }
        (workdir / "brokers").mkdir(parents=True, exist_ok=True)
        overrides = {
            "replica.lag.time.max.ms": 2000,
            "replica.fetch.backoff.ms": 200,
            **broker_keys,
            **(broker_overrides or {}),
        }
        dirs = {n: root / "brokers" / f"broker-{n}" for n in self.broker_ids}
        self.brokers = Brokers(
            workdir / "brokers",
            self.quorum.voters,
            self.broker_ids,
            overrides,
            dirs | (broker_data or {}),
            protocol="SASL_SSL" if secure else "PLAINTEXT",
            kafka=kafka,
        )
        if own_gids:  # (not always: a FUSE mount refuses processes of another gid)
            for n in self.quorum.ids:
                self.quorum.gids[n] = NODE_GID_BASE + n
            for n in self.broker_ids:
                self.brokers.gids[n] = NODE_GID_BASE + n

    def start(self) -> None:
        self.quorum.start_all()
        self.quorum.wait_leader(15, "a controller leader")
        self.brokers.start_all(BROKERS)
        with Admin(**self.client()) as admin:
            admin.create_topic(
                TOPIC, self.partition_count, 3, {"min.insync.replicas": str(MIN_ISR)}
            )
        wait_until(lambda: self.healthy(3), 30, f"{TOPIC} with ISR 3")

    def close(self) -> None:
        self.brokers.close()
        self.quorum.close()

    @property
    def bootstrap(self) -> str:
        return self.brokers.bootstrap_all()

    def client(self, **extra: Any) -> dict[str, Any]:
        """Keyword arguments for a client of this cluster (bootstrap, security, `extra`)."""
        return {"bootstrap_servers": self.bootstrap, **self.security, **extra}

    # -- endpoints for network faults ----------------------------------------------------------
    def broker_endpoint(self, n: int) -> Endpoint:
        return Endpoint(f"broker-{n}", self.brokers.gids[n], self.brokers.ports[n])

    def controller_endpoint(self, n: int) -> Endpoint:
        return Endpoint(f"controller-{n}", self.quorum.gids[n], self.quorum.ports[n])

    def endpoints(self) -> list[Endpoint]:
        return [self.controller_endpoint(n) for n in self.quorum.ids] + [
            self.broker_endpoint(n) for n in self.brokers.procs
        ]

    # -- questions -----------------------------------------------------------------------------
    def partitions(self, topic: str = TOPIC) -> list | None:
        try:
            with Admin(**self.client(request_timeout_ms=2000)) as admin:
                return admin.describe_topic(topic).partitions
        except GregorError:
            return None

    @property
    def kafka_bootstrap(self) -> str:
        return self.brokers.kafka_bootstrap()

    def leader_of(self, partition: int = 0, topic: str = TOPIC) -> int | None:
        ps = self.partitions(topic)
        return ps[partition].leader if ps and ps[partition].leader >= 0 else None

    def wait_leader_of(self, partition: int = 0, not_: int | None = None) -> int:
        return wait_until(
            lambda: (lambda n: n if n is not None and n != not_ else None)(
                self.leader_of(partition)
            ),
            30,
            f"a leader of {TOPIC}-{partition}" + (f" other than {not_}" if not_ else ""),
        )

    def healthy(self, isr: int = MIN_ISR) -> bool:
        ps = self.partitions()
        return bool(ps) and all(p.leader >= 0 and len(p.isr) >= isr for p in ps)

    def recovered(self) -> bool:
        """C7: every partition has a leader and an ISR >= min ISR, and takes an acks=all write."""
        if not self.healthy(MIN_ISR):
            return False
        with Producer(**self.client(acks="all", delivery_timeout_ms=5000)) as prod:
            try:
                for p in range(self.partition_count):
                    # unique and increasing, so the checker takes probes for one more producer
                    prod.send(TOPIC, b"probe-%d" % time.monotonic_ns(), partition=p).result(10)
            except GregorError:
                return False
        return True

    def controller_leader(self) -> int:
        return self.quorum.wait_leader(30, "a controller leader")

    def create_topic(self, name: str) -> str:
        """Create `name` (1 partition, RF 3), retrying while the quorum fails over."""

        def attempt() -> bool:
            try:
                with Admin(**self.client(request_timeout_ms=3000)) as admin:
                    admin.create_topic(name, 1, 3)
            except TopicAlreadyExistsError:
                return True  # an earlier attempt went through
            except GregorError:
                return False
            return True

        wait_until(attempt, 30, f"create {name} during controller failover")
        return name

    def topic_ready(self, name: str) -> bool:
        ps = self.partitions(name)
        return bool(ps) and all(p.leader >= 0 for p in ps)

    # -- the nodes' own events (CHECKER.md principle 7) ----------------------------------------
    def broker_logs(self) -> dict[int, list[Path]]:
        return {
            n: sorted(self.brokers.tmp.glob(f"broker-{n}.*.stderr"), key=log_order)
            for n in self.broker_ids
        }

    def controller_logs(self) -> dict[int, list[Path]]:
        """Every controller's, those added or removed during the run included."""
        out: dict[int, list[Path]] = {}
        for path in sorted(self.quorum.tmp.glob("controller-*.stderr"), key=log_order):
            out.setdefault(int(path.name.split(".")[0].split("-")[1]), []).append(path)
        return out


def _secure_keys(directory: Path) -> tuple[dict[str, Any], dict[str, Any], dict[str, str]]:
    """A CA and certificates in `directory`; the controllers' keys, the brokers' keys, and
    the harness's client settings (SCRAM admin, and a certificate to reach controllers)."""
    from broker.security import secure_setup

    hosts = (HOST, "localhost")
    files = secure_setup.generate(
        directory, dict.fromkeys(("controllers", "brokers", "harness"), hosts)
    )

    def tls(name: str) -> dict[str, str]:
        return {
            "ssl.certfile": str(files.node_cert(name)),
            "ssl.keyfile": str(files.node_key(name)),
            "ssl.cafile": str(files.ca),
        }

    controllers = {
        **tls("controllers"),
        "listener.security.protocol.map": "CONTROLLER:SSL",
        "ssl.client.auth": "required",
        "sasl.scram.bootstrap.file": str(files.scram_bootstrap),
    }
    brokers = {
        **tls("brokers"),
        "listener.security.protocol.map": "SASL_SSL:SASL_SSL,CONTROLLER:SSL",
        "inter.broker.listener.name": "SASL_SSL",
        "sasl.mechanism.inter.broker.protocol": secure_setup.MECHANISM,
        "sasl.inter.broker.username": secure_setup.INTER_BROKER_USER,
        "sasl.inter.broker.password": files.broker_password,
    }
    admin = files.admin_settings()
    harness = {
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": admin["sasl.mechanism"],
        "sasl_username": admin["sasl.username"],
        "sasl_password": admin["sasl.password"],
        "ssl_cafile": str(files.ca),
        "ssl_certfile": str(files.node_cert("harness")),
        "ssl_keyfile": str(files.node_key("harness")),
    }
    return controllers, brokers, harness


_RAFT_LEADER = re.compile(r"\[raft node=(?P<node>\d+)\] became leader in term (?P<term>\d+)")
_COUNTED = {
    "isr_changes": re.compile(r"ISR change to \[[^\]]*\] accepted"),
    "truncations": re.compile(r"truncating (to|fully)"),
    "elections": re.compile(r"became leader \(epoch"),
    "torn_tails_recovered": re.compile(r"recovery truncated segment"),
}


def raft_events(logs: dict[int, list[Path]]) -> list[dict]:
    events = []
    for paths in logs.values():
        for path in paths:
            for m in _RAFT_LEADER.finditer(path.read_text(errors="replace")):
                events.append({"type": "raft_leader", "node": int(m["node"]),
                               "term": int(m["term"])})  # fmt: skip
    return events


def log_counts(logs: dict[int, list[Path]]) -> dict[str, int]:
    """ISR changes, truncations and partition elections the brokers logged."""
    text = "".join(p.read_text(errors="replace") for paths in logs.values() for p in paths)
    return {name: len(rx.findall(text)) for name, rx in _COUNTED.items()}
