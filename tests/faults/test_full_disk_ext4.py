"""Full disk on a real server (fault F10): a `gregor server` whose log dir is on a 32 MiB
loop-mounted ext4 (tests/cluster/fault_disks.py: real ENOSPC and short writes), its metadata
dir elsewhere. What Gregor does today, as docs/operations.md ("A log directory that went
offline") says, checked step by step:

1. producing acks=all until the disk fills ends in a clear client error: the sends expire
   with KAFKA_STORAGE_ERROR ("log of T-P is offline") as their last error, and the broker logs
   the log dir OFFLINE with the ENOSPC once; the process does not crash;
2. every acknowledged record stays readable at its offset and the server keeps serving reads
   and metadata;
3. freeing space does not bring the dir back (Kafka's behaviour too): writes still fail with
   KAFKA_STORAGE_ERROR until a restart;
4. after a restart the dir is recovered and writes work again, after every acknowledged record.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from contextlib import AbstractContextManager
from pathlib import Path

import pytest
from helpers import GregorProcess, gregor_server, wait_until

from client import Admin, Consumer, Producer, TopicPartition
from client.errors import GregorTimeoutError, KafkaStorageError

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cluster"))  # fault_disks
from fault_disks import LoopExt4, unavailable_reason

TOPIC = "full"
VALUE = 10_000  # bytes per record


def _server(logs: Path, meta: Path, stderr_path: Path) -> AbstractContextManager[GregorProcess]:
    """A server with log.dirs=`logs` and its metadata elsewhere (`meta`)."""
    opts = ["--override", f"metadata.log.dir={meta}", "--override", "log.segment.bytes=4194304"]
    return gregor_server(logs, stderr_path, *opts)


def _produce_until_error(bootstrap: str, first: int, limit: int) -> tuple[list, BaseException]:
    """Send records first, first+1, ... one request at a time (acks=all) until one fails;
    returns the acknowledged (offset, value) pairs and the error. At most `limit` records."""
    acked = []
    with Producer(
        bootstrap_servers=bootstrap, acks="all", linger_ms=0, delivery_timeout_ms=3000
    ) as p:
        for i in range(first, first + limit):
            value = b"%08d" % i + os.urandom(VALUE - 8)
            try:
                meta = p.send(TOPIC, value, partition=0).result(30)
            except Exception as exc:
                return acked, exc
            acked.append((meta.offset, value))
    raise AssertionError(f"{limit} records of {VALUE} bytes fitted on the small disk")


def _read_all(bootstrap: str) -> list[tuple[int, bytes]]:
    tp = TopicPartition(TOPIC, 0)
    out: list[tuple[int, bytes]] = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        end = c.end_offsets([tp])[tp]
        deadline = time.monotonic() + 30
        while len(out) < end:
            assert time.monotonic() < deadline, f"read {len(out)} of {end} records"
            out += [(r.offset, r.value) for r in c.poll(500)]
    return out


def _assert_storage_error(exc: BaseException) -> None:
    assert isinstance(exc, GregorTimeoutError), repr(exc)
    assert "KAFKA_STORAGE_ERROR" in str(exc) and "offline" in str(exc), str(exc)
    assert isinstance(exc.__cause__, KafkaStorageError), repr(exc.__cause__)


@pytest.mark.slow
def test_full_disk_gives_a_storage_error_keeps_data_and_recovers_after_restart(tmp_path):
    reason = unavailable_reason()
    if reason:
        pytest.skip(reason)
    meta = tmp_path / "meta"
    with LoopExt4(tmp_path / "disk.img", tmp_path / "mnt", size_mib=32) as disk:
        logs = disk.mountpoint / "logs"
        with _server(logs, meta, tmp_path / "gregor-1.stderr") as gp:
            with Admin(bootstrap_servers=gp.bootstrap) as admin:
                admin.create_topic(TOPIC, partitions=1)
            filler = disk.fill(leave_bytes=3 << 20)  # ~3 MiB left: ~300 records
            free_before = disk.free_bytes()
            t0 = time.monotonic()
            acked, exc = _produce_until_error(gp.bootstrap, 0, 2000)
            error_s = time.monotonic() - t0
            # 1. a clear error, no crash, the cause logged once
            _assert_storage_error(exc)
            assert gp.proc.poll() is None, gp.stderr()
            assert len(acked) * VALUE > free_before // 2, (len(acked), free_before)
            wait_until(lambda: "is OFFLINE" in gp.stderr(), 10, "the OFFLINE line")
            offline = [ln for ln in gp.stderr().splitlines() if "is OFFLINE" in ln]
            assert len(offline) == 1 and "No space left on device" in offline[0], offline
            # 2. acknowledged records readable at their offsets; reads and metadata served
            assert _read_all(gp.bootstrap) == acked
            with Admin(bootstrap_servers=gp.bootstrap) as admin:
                assert TOPIC in admin.list_topics()
            # 3. space freed: the dir stays offline until a restart
            filler.unlink()
            assert disk.free_bytes() > 20 << 20
            more, exc2 = _produce_until_error(gp.bootstrap, len(acked), 10)
            assert more == []
            _assert_storage_error(exc2)
            os.killpg(gp.proc.pid, signal.SIGTERM)  # stops cleanly with the dir offline
            code = gp.proc.wait(30)
            assert code == 0, gp.stderr()
        print(
            f"{len(acked)} records of {VALUE} B acknowledged before the disk filled "
            f"({free_before >> 10} KiB free at the start), error after {error_s:.1f}s: "
            f"{str(exc)[:160]}; SIGTERM with the dir offline: exit {code}"
        )
        # 4. restarted: recovered, every acknowledged record there, writes work again
        with _server(logs, meta, tmp_path / "gregor-2.stderr") as gp2:
            assert _read_all(gp2.bootstrap) == acked
            with Producer(bootstrap_servers=gp2.bootstrap, acks="all") as p:
                futures = [p.send(TOPIC, b"after-%d" % i, partition=0) for i in range(20)]
                offsets = [f.result(30).offset for f in futures]
            assert offsets == list(range(len(acked), len(acked) + 20))
            os.killpg(gp2.proc.pid, signal.SIGTERM)
            assert gp2.proc.wait(30) == 0
