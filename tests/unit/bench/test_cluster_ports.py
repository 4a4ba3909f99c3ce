"""scripts/bench/_cluster.py's port range: free, and outside the kernel's ephemeral ports (which
any outgoing connection may take between the probe and a node's bind)."""

from __future__ import annotations

import socket
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]


def test_the_base_port_is_free_and_below_the_ephemeral_range() -> None:
    sys.path.insert(0, str(ROOT / "scripts" / "bench"))
    try:
        import _cluster
    finally:
        sys.path.remove(str(ROOT / "scripts" / "bench"))
    low = _cluster.ephemeral_port_low()
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        assert low == int(f.read().split()[0])
    for _ in range(20):
        base = _cluster.free_base_port()
        ports = [base, base + 1, base + 2, base + 101, base + 102, base + 103]
        assert all(1024 < p < low for p in ports), (base, low)
        for p in ports:
            with socket.socket() as s:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
                s.bind(("127.0.0.1", p))
