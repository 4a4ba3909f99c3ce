"""The cluster id of a combined node (`gregor server`: a one-voter quorum): written into its
metadata log once, stored in `<log.dirs[0]>/cluster.id`; an existing node keeps the id it had
before the ClusterId record existed; another configured id is refused."""

from __future__ import annotations

import pytest
from helpers import RawClient

from client import Admin
from client.errors import InconsistentClusterIdError
from client.protocol import ApiKey
from controller.metadata import ClusterId, decode_record
from controller.quorum.combined import CombinedController
from controller.quorum.controller import QuorumController


def _answers(broker) -> tuple[str, str]:
    """(Metadata's cluster id, DescribeCluster's)."""
    with RawClient(broker.address) as c:
        meta = c.request(ApiKey.METADATA, 0, {"topics": None})
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        return meta["cluster_id"], admin.describe_cluster().cluster_id


def _records_of(cc: CombinedController) -> list:
    return [decode_record(d) for _, d in cc.log.read(0)]


def test_fresh_node_fixes_stores_and_keeps_one_id(broker_factory, tmp_path) -> None:
    data = tmp_path / "fresh"
    broker = broker_factory(data_dir=data)
    cid = broker.server.node.quorum.controller.image.cluster_id
    assert cid and (data / "cluster.id").read_text() == cid + "\n"
    assert _answers(broker) == (cid, cid)
    assert [
        r for r in _records_of(broker.server.node.quorum.controller) if isinstance(r, ClusterId)
    ] == [ClusterId(cid)]
    broker.server.shutdown(timeout=10)
    again = broker_factory(data_dir=data)
    assert again.server.node.quorum.controller.image.cluster_id == cid
    assert _answers(again) == (cid, cid)


def test_existing_node_keeps_its_id(broker_factory, tmp_path, monkeypatch) -> None:
    """A data dir from before the ClusterId record: a metadata log without one, and the id the
    broker minted itself in cluster.id. The first start adopts that id."""
    data = tmp_path / "old"
    with monkeypatch.context() as m:
        m.setattr(QuorumController, "ensure_cluster_id", lambda self: None)
        cc = CombinedController(1, str(data / "__cluster_metadata"))
        cc.start()
        reg = cc.channel.register_broker(1, "127.0.0.1", 1, None, "old-incarnation").result(5)
        assert reg["error_code"] == 0 and reg["cluster_id"] is None
        assert cc.image.cluster_id is None and cc.image.offset >= 0
        cc.stop()
    (data / "cluster.id").write_text("d4e6fb458dcf4e70906c35\n")
    broker = broker_factory(data_dir=data)
    assert broker.server.node.quorum.controller.image.cluster_id == "d4e6fb458dcf4e70906c35"
    assert _answers(broker) == ("d4e6fb458dcf4e70906c35", "d4e6fb458dcf4e70906c35")
    assert (data / "cluster.id").read_text() == "d4e6fb458dcf4e70906c35\n"


def test_configured_id_must_match_the_logs(broker_factory, tmp_path) -> None:
    data = tmp_path / "configured"
    broker = broker_factory(data_dir=data, cluster_id="configured-id")
    assert _answers(broker) == ("configured-id", "configured-id")
    broker.server.shutdown(timeout=10)
    (data / "cluster.id").unlink()  # only the metadata log still says configured-id
    with pytest.raises(InconsistentClusterIdError) as e:
        broker_factory(data_dir=data, cluster_id="other-id")
    msg = str(e.value)
    assert "'other-id'" in msg and "'configured-id'" in msg and "cluster.id config key" in msg
