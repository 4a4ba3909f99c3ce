"""The quorum controller: topic/broker/ISR logic over a MetadataLog (local file or Raft)."""

from controller.quorum.controller import ControllerSettings, QuorumController
from controller.quorum.loader import MetadataLoader
from controller.quorum.local import LocalController
from controller.quorum.log import LocalMetadataLog, MetadataLog
from controller.quorum.runner import ControllerThread

__all__ = [
    "ControllerSettings",
    "ControllerThread",
    "LocalController",
    "LocalMetadataLog",
    "MetadataLoader",
    "MetadataLog",
    "QuorumController",
]
