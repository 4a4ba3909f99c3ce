"""Network faults of the harness (CHECKER.md F4a-c, F5), inside a throw-away network namespace.

The whole scenario (nodes, workload, nemesis) runs in one namespace the harness creates with
`ip netns add` and leaves with `ip netns del` (`in_netns`). Every node listens on the
namespace's own loopback and runs with a gid of its own (`NODE_GID_BASE + node id`), so
iptables' owner match tells whose packet it is: a cut between nodes A and B drops A's packets to
B's port and B's packets to A's port (`Net.cut`); a client cut drops the packets of the harness
process (gid 0) to every node. Rules go in the namespace's OUTPUT chain only and `heal()` flushes
it; the root namespace is never touched.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

NODE_GID_BASE = 61000
NETNS_ENV = "GREGOR_CHAOS_NETNS"  # set inside the namespace the harness made


@dataclass(frozen=True)
class Endpoint:
    """A node as iptables sees it: the gid its process runs with and the port it listens on."""

    name: str
    gid: int
    port: int


def missing_tools() -> str | None:
    """Why network faults cannot run here, or None."""
    if os.geteuid() != 0:
        return "network faults need root (ip netns, iptables)"
    for tool in ("ip", "iptables"):
        if shutil.which(tool) is None:
            return f"network faults need `{tool}` (scripts/test.sh installs it from Debian)"
    return None


def inside_netns() -> bool:
    return bool(os.environ.get(NETNS_ENV))


def in_netns(argv: list[str], timeout: float) -> subprocess.CompletedProcess[bytes]:
    """Run argv in a new network namespace with its loopback up; remove the namespace (and any
    process left in it) afterwards, also on failure or timeout."""
    name = f"gregor-chaos-{uuid.uuid4().hex[:8]}"
    subprocess.run(["ip", "netns", "add", name], check=True)
    try:
        subprocess.run(["ip", "netns", "exec", name, "ip", "link", "set", "lo", "up"], check=True)
        env = {**os.environ, NETNS_ENV: name}
        return subprocess.run(["ip", "netns", "exec", name, *argv], env=env, timeout=timeout)
    finally:
        left = subprocess.run(["ip", "netns", "pids", name], capture_output=True, text=True)
        for pid in left.stdout.split():
            try:
                os.kill(int(pid), signal.SIGKILL)  # only processes of the namespace we made
            except ProcessLookupError:
                pass
        subprocess.run(["ip", "netns", "del", name], check=False)


class Net:
    """iptables rules in the current (harness-made) namespace; `heal()` removes them all."""

    def __init__(self) -> None:
        assert inside_netns(), "network faults run only inside the harness's own namespace"
        self.rules: list[list[str]] = []

    def _drop(self, *spec: str) -> None:
        rule = ["-A", "OUTPUT", *spec, "-j", "DROP"]
        subprocess.run(["iptables", *rule], check=True)
        self.rules.append(rule)

    def cut(self, a: Endpoint, others: Iterable[Endpoint]) -> None:
        """No packet between `a` and any of `others`, both ways (clients still reach `a`)."""
        for b in others:
            self._drop("-p", "tcp", "-m", "owner", "--gid-owner", str(a.gid),
                       "--dport", str(b.port))  # fmt: skip
            self._drop("-p", "tcp", "-m", "owner", "--gid-owner", str(b.gid),
                       "--dport", str(a.port))  # fmt: skip

    def loss(self, a: Endpoint, probability: float) -> None:
        """Drop each packet `a` sends, and each packet sent to its port, with `probability`."""
        rand = ["-m", "statistic", "--mode", "random", "--probability", str(probability)]
        self._drop("-p", "tcp", "-m", "owner", "--gid-owner", str(a.gid), *rand)
        self._drop("-p", "tcp", "--dport", str(a.port), *rand)

    def cut_clients(self, nodes: Iterable[Endpoint]) -> None:
        """The harness's own clients (gid 0) reach no node."""
        for n in nodes:
            self._drop("-p", "tcp", "-m", "owner", "--gid-owner", "0", "--dport", str(n.port))

    def heal(self) -> None:
        subprocess.run(["iptables", "-F", "OUTPUT"], check=True)
        self.rules.clear()
