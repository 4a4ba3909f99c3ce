"""A cluster of real processes on loopback: a `gregor controller` quorum (ControllerQuorum)
and `gregor broker` processes joining it (Brokers), with start / kill / terminate / pause /
resume of one broker. Used through the `broker_cluster` fixture (tests/cluster/conftest.py)."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from controller_quorum import HOST, free_ports
from helpers import GregorProcess, spawn_gregor


class Brokers:
    def __init__(
        self,
        tmp: Path,
        voters: str,
        ids: list[int],
        overrides: dict[str, Any] | None = None,
        data_dirs: dict[int, Path] | None = None,
        kafka: bool = False,
        protocol: str = "PLAINTEXT",
    ) -> None:
        """`data_dirs`: a broker's log dir elsewhere than `tmp/broker-N` (e.g. on a small
        or failing file system); configs and logs stay in `tmp`. `kafka`: each broker also
        gets a KAFKA listener (Kafka's protocol, docs/kafka-compat.md) on a port of its own
        (`kafka_ports`, `kafka_bootstrap`). `protocol`: the name of the (native) listener,
        PLAINTEXT or one of the security protocols (its keys in `overrides`)."""
        self.tmp = tmp
        self.data_dirs = {n: tmp / f"broker-{n}" for n in ids} | (data_dirs or {})
        ports = free_ports(2 * len(ids) if kafka else len(ids))  # distinct: bound together
        self.ports = dict(zip(ids, ports[: len(ids)], strict=True))
        self.kafka_ports = dict(zip(ids, ports[len(ids) :], strict=True)) if kafka else {}
        self.configs: dict[int, Path] = {}
        extra = "".join(f"{k}: {v}\n" for k, v in (overrides or {}).items())
        for n, port in self.ports.items():
            self.configs[n] = tmp / f"broker-{n}.yaml"
            self.configs[n].write_text(
                "process.roles: broker\n"
                f"node.id: {n}\n"
                f'controller.quorum.voters: "{voters}"\n'
                f"listeners: {protocol}://{HOST}:{port}"
                + (f",KAFKA://{HOST}:{self.kafka_ports[n]}\n" if kafka else "\n")
                + f"log.dirs: {self.data_dirs[n]}\n"
                "broker.heartbeat.interval.ms: 300\n" + extra
            )
        self.procs: dict[int, GregorProcess] = {}
        self.gids: dict[int, int] = {}  # node -> gid to run it with (network faults)
        self._all: list[GregorProcess] = []

    def spawn(self, n: int) -> GregorProcess:
        gp = spawn_gregor(
            ["broker", "--config", str(self.configs[n])],
            self.data_dirs[n],
            self.tmp / f"broker-{n}.{len(self._all)}.stderr",
            self.gids.get(n),
        )
        self._all.append(gp)
        self.procs[n] = gp
        return gp

    def start(self, n: int, timeout: float = 30.0) -> GregorProcess:
        gp = self.spawn(n)
        gp.wait_ready(timeout)
        return gp

    def start_all(self, ns: Iterable[int], timeout: float = 30.0) -> list[GregorProcess]:
        """Spawn brokers `ns` at once (their start-ups overlap), then wait for each to listen."""
        gps = [self.spawn(n) for n in ns]
        for gp in gps:
            gp.wait_ready(timeout)
        return gps

    def stop(self, n: int, sig: int) -> int:
        gp = self.procs.pop(n)
        os.killpg(gp.proc.pid, sig)
        return gp.proc.wait(30)

    def pause(self, n: int) -> None:
        os.killpg(self.procs[n].proc.pid, signal.SIGSTOP)

    def resume(self, n: int) -> None:
        os.killpg(self.procs[n].proc.pid, signal.SIGCONT)

    def bootstrap(self, n: int) -> str:
        return f"{HOST}:{self.ports[n]}"

    def kafka_bootstrap(self) -> str:
        return ",".join(f"{HOST}:{p}" for p in self.kafka_ports.values())

    def bootstrap_all(self) -> str:
        return ",".join(self.bootstrap(n) for n in self.ports)

    def stderr(self) -> str:
        out = []
        for path in sorted(self.tmp.glob("broker-*.stderr")):
            out.append(f"--- {path.name}\n{path.read_text()[-4000:]}")
        return "\n".join(out)

    def close(self) -> None:
        for gp in self._all:
            if gp.proc.poll() is None:
                os.killpg(gp.proc.pid, signal.SIGCONT)
                os.killpg(gp.proc.pid, signal.SIGKILL)
                gp.proc.wait(10)
            gp.close()
