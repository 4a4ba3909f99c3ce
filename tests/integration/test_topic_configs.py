"""Topic configs seen and changed on a live broker (issue 10, item 11): Admin.describe_configs
and Admin.incremental_alter_configs, `gregor configs describe|alter`, `gregor topics describe`
showing the overrides, and the changes applied to the live logs without a restart."""

from __future__ import annotations

import subprocess

import pytest
from helpers import gregor_command, wait_until

from client import Admin, Producer
from client.errors import InvalidConfigError, UnknownTopicOrPartitionError


def _overrides(admin: Admin, topic: str) -> dict:
    entries = admin.describe_configs(topics=[topic])[("topic", topic)]
    return {k: e.value for k, e in entries.items() if not e.is_default}


def test_alter_applies_to_the_live_log_and_delete_restores_the_default(broker_factory) -> None:
    broker = broker_factory(**{"log.retention.check.interval.ms": 100})
    log_of = broker.server.services.log_manager.get
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("cfg")
        entries = admin.describe_configs(topics=["cfg"])[("topic", "cfg")]
        assert entries["segment.bytes"].is_default and _overrides(admin, "cfg") == {}
        admin.incremental_alter_configs(
            {("topic", "cfg"): {"segment.bytes": "2048", "retention.bytes": "4096"}}
        )
        wait_until(lambda: _overrides(admin, "cfg").get("segment.bytes") == "2048", 10, "alter")
        assert _overrides(admin, "cfg") == {"segment.bytes": "2048", "retention.bytes": "4096"}
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as p:
            for i in range(60):  # ~300 B batches: many 2 KiB segments, then retention
                p.send("cfg", b"%04d" % i + b"x" * 200).result(30)
        log = log_of("cfg", 0)
        bases = log.segment_base_offsets  # rolled every ~7 batches at the new size, no restart
        assert len(bases) > 1 and bases[-1] - bases[-2] < 10 and bases[-1] >= 40, bases
        wait_until(lambda: log.log_start_offset > 0, 15, "retention.bytes applied")
        # retention runs every 100 ms: down to retention.bytes plus the active segment
        wait_until(lambda: log.size_bytes <= 4096 + 2048, 15, "log trimmed to retention.bytes")
        admin.incremental_alter_configs({("topic", "cfg"): {"segment.bytes": None}})
        wait_until(lambda: "segment.bytes" not in _overrides(admin, "cfg"), 10, "delete")
        wait_until(lambda: log.config.segment_bytes > 2048, 10, "the default back on the log")


def test_bad_changes_are_refused_naming_what_is_wrong(broker_server) -> None:
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        admin.create_topic("strict")
        with pytest.raises(InvalidConfigError, match="no.such.key"):
            admin.incremental_alter_configs({("topic", "strict"): {"no.such.key": "1"}})
        with pytest.raises(InvalidConfigError, match="segment.bytes"):
            admin.incremental_alter_configs({("topic", "strict"): {"segment.bytes": "tiny"}})
        with pytest.raises(InvalidConfigError, match="not supported yet"):
            admin.incremental_alter_configs({("topic", "strict"): {"max.compaction.lag.ms": "5"}})
        with pytest.raises(InvalidConfigError, match="cleanup.policy"):
            admin.incremental_alter_configs({("topic", "strict"): {"cleanup.policy": "squash"}})
        with pytest.raises(InvalidConfigError, match="dynamic broker configs"):
            admin.incremental_alter_configs({("broker", "1"): {"log.retention.ms": "5"}})
        with pytest.raises(UnknownTopicOrPartitionError):
            admin.incremental_alter_configs({("topic", "nope"): {"retention.ms": "5"}})
        assert _overrides(admin, "strict") == {}


def test_topic_config_typos_get_a_suggestion_on_create_and_alter(broker_server) -> None:
    """Issue 22, item 5: `min.insync.replica` gets the same "did you mean" as broker and client
    keys, from the controller, both when a topic is created and when it is altered."""
    with Admin(bootstrap_servers=broker_server.bootstrap) as admin:
        with pytest.raises(InvalidConfigError, match="did you mean 'min.insync.replicas'"):
            admin.create_topic("typo", config={"min.insync.replica": "2"})
        admin.create_topic("typo")
        with pytest.raises(InvalidConfigError, match="did you mean 'min.insync.replicas'"):
            admin.incremental_alter_configs({("topic", "typo"): {"min.insync.replica": "2"}})
        with pytest.raises(InvalidConfigError, match="set retention.ms=3600000"):
            admin.incremental_alter_configs({("topic", "typo"): {"retention.hours": "1"}})
        assert _overrides(admin, "typo") == {}


def _gregor(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([*gregor_command(), *args], capture_output=True, text=True, timeout=60)


def test_cli_configs_and_topics_describe(gregor_process) -> None:
    gp = gregor_process()
    bs = ["--bootstrap-server", gp.bootstrap]
    assert _gregor("topics", "create", "c", *bs).returncode == 0
    r = _gregor("configs", "alter", "--topic", "c", "--set", "retention.ms=60000",
                "--set", "segment.bytes=1048576", *bs)  # fmt: skip
    assert r.returncode == 0, r.stderr
    r = _gregor("configs", "describe", "--topic", "c", *bs)
    assert r.returncode == 0 and r.stdout.split() == ["retention.ms=60000", "segment.bytes=1048576"]
    assert (
        "Configs: retention.ms=60000,segment.bytes=1048576"
        in _gregor("topics", "describe", "c", *bs).stdout
    )
    r = _gregor("configs", "alter", "--topic", "c", "--delete", "retention.ms", *bs)
    assert r.returncode == 0, r.stderr
    assert _gregor("configs", "describe", "--topic", "c", *bs).stdout.split() == [
        "segment.bytes=1048576"
    ]
    r = _gregor("configs", "alter", "--topic", "c", "--set", "retention.ms=soon", *bs)
    assert r.returncode == 1 and "retention.ms" in r.stderr and "INVALID_CONFIG" in r.stderr
    r = _gregor("configs", "describe", "--topic", "c", "--all", *bs)
    assert "retention.ms=" in r.stdout and "(default)" in r.stdout
