"""The broker's network layer (docs/architecture.md §5, steps 1, 2 and 6): acceptor, network
threads (one uvloop loop each), connections with muting, frames in and out. No business rules.

    from broker.network import SocketServer, NetworkSettings, Request
"""

from broker.network.request import Request
from broker.network.socket_server import NetworkSettings, SocketServer

__all__ = ["NetworkSettings", "Request", "SocketServer"]
