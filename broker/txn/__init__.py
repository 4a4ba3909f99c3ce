"""The transaction coordinator (KIP-98): transactional ids, their producer ids and epochs, and
the state of their transactions in the compacted `__transaction_state` topic
(docs/transactions.md)."""

from broker.txn.coordinator import TxnCoordinator, TxnError
from broker.txn.markers import MarkerChannel, MarkerJob, NetworkMarkerChannel
from broker.txn.topic import TxnSettings

__all__ = [
    "MarkerChannel",
    "MarkerJob",
    "NetworkMarkerChannel",
    "TxnCoordinator",
    "TxnError",
    "TxnSettings",
]
