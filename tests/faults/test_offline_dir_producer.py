"""A producer against a broker whose log dir went offline (disk full) (issue 10, item 10).

The broker answers KAFKA_STORAGE_ERROR (retriable: in Kafka another replica may take over), so
the producer retries until delivery.timeout.ms; the error it then raises names that last error
and its message (as its text and its __cause__), not just "records expired". The log dir sits
on a 2 MiB tmpfs; skipped with the reason where mounting is not possible.
"""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from client import Admin, Producer
from client.errors import GregorTimeoutError, KafkaStorageError


@pytest.fixture
def small_disk(tmp_path):
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a tmpfs needs root and mount(8)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(mnt)],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {res.stderr.strip()}")
    yield mnt
    subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=30)


def test_expiry_error_names_the_storage_error(broker_factory, small_disk, tmp_path) -> None:
    broker = broker_factory(
        data_dir=small_disk / "logs",
        **{"metadata.log.dir": str(tmp_path / "meta"), "log.segment.bytes": 64 * 1024 * 1024},
    )
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topic("full")
    with Producer(bootstrap_servers=broker.bootstrap, delivery_timeout_ms=3000, linger_ms=0) as p:
        with pytest.raises(GregorTimeoutError) as info:
            for _ in range(100):  # 100 x 64 KiB is far beyond the 2 MiB disk
                p.send("full", os.urandom(64 * 1024)).result(30)
    err = info.value
    assert "expired after delivery.timeout.ms=3000" in str(err)
    assert "KAFKA_STORAGE_ERROR" in str(err) and "offline" in str(err)
    assert isinstance(err.__cause__, KafkaStorageError)
