"""A node's own cluster id, and the check against the controller quorum's.

The quorum fixes the cluster id once, as a ClusterId record in the metadata log
(controller/metadata/records.py). Each node also holds an id of its own, from the
`cluster.id` config key or from the file `cluster.id` in its data dir (a broker's first
`log.dirs` entry, a controller's `metadata.log.dir`), as Kafka keeps it in meta.properties:

    local = LocalClusterId(data_dir, configured=config.cluster_id)
    local.value                     # configured, else stored, else None (a new node)
    local.check(quorum_id)          # InconsistentClusterIdError naming both ids and the source
    local.store(quorum_id)          # writes the file (atomically) when it does not hold it yet

File layout: the id as UTF-8 text, one line. Any thread; the file is written with
client.fsutil.write_atomic (temp, fsync, rename, fsync dir).
"""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

from client.errors import ConfigError, InconsistentClusterIdError
from client.fsutil import write_atomic

CLUSTER_ID_FILE = "cluster.id"


def new_cluster_id() -> str:
    """A fresh random id in Kafka's form: a UUID as 22 characters of URL-safe base64."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")


class LocalClusterId:
    def __init__(self, directory: str | Path, configured: str | None = None) -> None:
        self.path = Path(directory) / CLUSTER_ID_FILE
        if configured is not None and not str(configured).strip():
            raise ConfigError("cluster.id: empty; leave it unset to take the quorum's id")
        self.configured = None if configured is None else str(configured).strip()
        self.stored = self._read()
        if self.configured and self.stored and self.configured != self.stored:
            raise InconsistentClusterIdError(
                f"cluster.id is configured as {self.configured!r} but {self.path} holds"
                f" {self.stored!r}, the id of the cluster this node belongs to; refusing to"
                f" start (remove the key, or set it to {self.stored!r})"
            )

    def _read(self) -> str | None:
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return text or None

    @property
    def value(self) -> str | None:
        """This node's own id: configured, else stored, else None (it takes the quorum's)."""
        return self.configured or self.stored

    @property
    def source(self) -> str:
        """Where `value` comes from, for messages."""
        return "the cluster.id config key" if self.configured else str(self.path)

    def advice(self) -> str:
        """How to recover, for the refusal."""
        if self.configured:
            return "set cluster.id to the quorum's id, or remove the key, to join that cluster"
        return f"delete {self.path} only if this node is meant to join that cluster"

    def mismatch(self, quorum_id: str, role: str) -> str:
        """The one-line refusal: both ids, and where this node's comes from."""
        return (
            f"{role} has cluster id {self.value!r} (from {self.source}) but the controller"
            f" quorum's cluster id is {quorum_id!r}; refusing to join another cluster"
            f" ({self.advice()})"
        )

    def check(self, quorum_id: str | None, role: str = "this node") -> None:
        """InconsistentClusterIdError when this node's id differs from `quorum_id` (None: not
        known yet, nothing to compare)."""
        own = self.value
        if quorum_id is not None and own is not None and own != quorum_id:
            raise InconsistentClusterIdError(self.mismatch(quorum_id, role))

    def store(self, quorum_id: str) -> bool:
        """Keep the quorum's id in the data dir (after `check`); True when the file was written."""
        self.check(quorum_id)
        if self.stored == quorum_id:
            return False
        write_atomic(self.path, quorum_id + "\n")
        self.stored = quorum_id
        return True
