"""Both ControllerChannel implementations (in-process and network) declare every method of the
Protocol with the same parameters and result types, and nothing dispatches calls by name.

mypy checks the same statically (`_conforms` at the end of controller/quorum/in_process.py and
remote.py, run by scripts/test.sh); this test fails at once when a call is added to one side only.
"""

from __future__ import annotations

import inspect
import typing
from concurrent.futures import Future

import pytest

from controller.channel import ControllerChannel
from controller.quorum.combined import CombinedController
from controller.quorum.controller import QuorumController
from controller.quorum.in_process import InProcessChannel
from controller.quorum.local import LocalController
from controller.quorum.log import LocalMetadataLog
from controller.quorum.remote import RemoteController
from controller.quorum.runner import ControllerThread

IMPLEMENTATIONS = (InProcessChannel, RemoteController)


def channel_methods() -> list[str]:
    return sorted(
        name
        for name, member in vars(ControllerChannel).items()
        if inspect.isfunction(member) and not name.startswith("_")
    )


def mismatches(cls: type) -> list[str]:
    """What `cls` lacks or declares differently from ControllerChannel (empty: conforms)."""
    out = []
    for name in channel_methods():
        want = getattr(ControllerChannel, name)
        have = getattr(cls, name, None)
        if not callable(have):
            out.append(f"{cls.__name__}.{name} missing")
            continue
        w, h = inspect.signature(want), inspect.signature(have)
        if list(w.parameters.values()) != list(h.parameters.values()):
            out.append(f"{cls.__name__}.{name}{h} differs from the Protocol's {w}")
        want_ret = typing.get_type_hints(want)["return"]
        have_ret = typing.get_type_hints(have).get("return")
        if have_ret != want_ret:
            out.append(f"{cls.__name__}.{name} returns {have_ret}, the Protocol {want_ret}")
    return out


def test_the_protocol_declares_the_calls() -> None:
    names = channel_methods()
    assert {"register_broker", "broker_heartbeat", "create_topics", "describe_quorum"} <= set(names)
    for name in names:
        ret = typing.get_type_hints(getattr(ControllerChannel, name))["return"]
        assert typing.get_origin(ret) is Future and typing.get_args(ret), (
            f"ControllerChannel.{name} must return a typed Future, not {ret}"
        )


@pytest.mark.parametrize("cls", IMPLEMENTATIONS, ids=lambda c: c.__name__)
def test_implementation_conforms(cls: type) -> None:
    assert mismatches(cls) == []


def test_the_check_catches_a_missing_or_different_method() -> None:
    class Partial(InProcessChannel):
        def delete_topics(self, names: list[str], force: bool = False) -> Future[list]:  # type: ignore[override]
            raise NotImplementedError

    Partial.create_topics = None  # type: ignore[assignment,method-assign]
    got = mismatches(Partial)
    assert any("Partial.create_topics missing" in m for m in got), got
    assert any(m.startswith("Partial.delete_topics(") for m in got), got
    assert any("Partial.delete_topics returns" in m for m in got), got


def test_remote_controller_is_a_runtime_controller_channel() -> None:
    remote = RemoteController({1: ("127.0.0.1", 1)})
    try:
        assert isinstance(remote, ControllerChannel)
    finally:
        remote.close()


def test_combined_controller_exposes_an_in_process_channel(tmp_path) -> None:
    cc = CombinedController(1, str(tmp_path))
    try:
        assert isinstance(cc.channel, InProcessChannel)
        assert isinstance(cc.channel, ControllerChannel)
    finally:
        cc.stop()


@pytest.mark.parametrize(
    "cls", (QuorumController, ControllerThread, LocalController, RemoteController, *IMPLEMENTATIONS)
)
def test_no_dispatch_by_name(cls: type) -> None:
    """No `__getattr__` forwarding, no `submit(method_name, ...)`: requests are typed methods
    of the manager that owns them (QuorumController.replication.create_topics, ...)."""
    assert "__getattr__" not in vars(cls)
    submit = vars(cls).get("submit")
    if submit is not None:
        params = list(inspect.signature(submit).parameters)
        assert params == ["self", "call"], f"{cls.__name__}.submit{params}"


def test_quorum_controller_offers_requests_only_through_its_managers(tmp_path) -> None:
    log = LocalMetadataLog(str(tmp_path))
    try:
        qc = QuorumController(log)
        for name in channel_methods():
            assert not hasattr(qc, name), f"QuorumController.{name} rebinds a manager's method"
        assert callable(qc.replication.create_topics) and callable(qc.cluster.register_broker)
    finally:
        log.close()
