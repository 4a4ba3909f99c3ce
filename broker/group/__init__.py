"""The group coordinator (docs/architecture.md §9; KIP-848 consumer groups).

- `state.py`: one group's membership state machine (pure): epochs, incremental hand-over, fencing;
- `assignors.py`: the server-side `uniform` and `range` assignors (pure);
- `offsets.py`: the `__consumer_offsets` record format and the committed-offset table;
- `coordinator.py`: the shards this broker leads, loading, expiry, the commit write path.
"""

from broker.group.coordinator import GroupCoordinator
from broker.group.offsets_topic import OFFSETS_TOPIC, GroupSettings, partition_for
from broker.group.state import GroupError

__all__ = ["OFFSETS_TOPIC", "GroupCoordinator", "GroupError", "GroupSettings", "partition_for"]
