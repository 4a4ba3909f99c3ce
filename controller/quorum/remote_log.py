"""RemoteMetadataLog: the metadata log of a remote controller quorum, followed as an observer.

`RemoteMetadataLog(voters, replica_id=-1)` is a read-only MetadataLog (an observer; a broker
passes its node id, and the leader's DescribeQuorum then lists it with its fetch position and
last contact): a background thread long-polls MetadataFetch (1001) from the leader (the
controller parks the fetch up to `fetch_max_wait_ms` until new records commit;
`poll_interval_ms` is the back-off after an empty answer or an error; a fetch unanswered
`fetch_timeout_ms` after its long poll moves on to another voter), keeps the committed records
in memory, and calls listeners like any MetadataLog (an empty batch = reset to the snapshot it
fetched because its position was compacted away). `append` raises NOT_CONTROLLER.

Threading: thread-safe; it owns its fetcher thread and stops it in `close()`.
"""

from __future__ import annotations

import logging
import threading

from client.errors import ErrorCode, NotControllerError
from client.protocol.api_keys import ApiKey
from client.security.tls import ReloadableContext
from controller.quorum.leader_tracker import LeaderTracker, client_context_of, voters_of
from controller.quorum.log import CommittedRecords, Listener, MetadataLog
from controller.quorum.network import request

_log = logging.getLogger(__name__)


class RemoteMetadataLog(MetadataLog):
    def __init__(
        self,
        voters: str | dict[int, tuple[str, int]],
        poll_interval_ms: int = 50,
        max_records: int = 10_000,
        max_records_in_memory: int = 1_000_000,
        client_id: str = "gregor-observer",
        fetch_max_wait_ms: int = 500,
        replica_id: int = -1,
        fetch_timeout_ms: int = 2000,
        tls: ReloadableContext | None = None,
    ) -> None:
        self.tls = tls  # the controllers' listener is SSL
        self.replica_id = replica_id  # a broker's node id: DescribeQuorum lists it as observer
        # beyond the long poll: a paused leader accepts the connection and never answers
        self.fetch_timeout_s = (fetch_timeout_ms + fetch_max_wait_ms) / 1000.0
        self.tracker = LeaderTracker(voters_of(voters))
        self.poll_interval_s = poll_interval_ms / 1000.0
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.max_records = max_records
        self.max_records_in_memory = max_records_in_memory
        self.client_id = client_id
        self._records = CommittedRecords(max_records_in_memory)
        self._lock = self._records.lock
        self._committed = -1
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="metadata-fetcher", daemon=True)
        self.fetches = 0

    def start(self) -> None:
        self._thread.start()

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    # -- fetcher thread ------------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                got = self._fetch_once()
            except Exception:
                _log.exception("metadata fetch failed")
                got = 0
            if not got:
                self._stop.wait(self.poll_interval_s)

    def _fetch_once(self) -> int:
        nid, (host, port) = self.tracker.target()
        with self._lock:
            position = max(self._records.last_offset(), self._committed) + 1
        try:
            resp = request(
                host,
                port,
                ApiKey.METADATA_FETCH,
                {
                    "from_offset": position,
                    "max_records": self.max_records,
                    "max_wait_ms": self.fetch_max_wait_ms,
                    "replica_id": self.replica_id,
                },
                timeout=self.fetch_timeout_s,
                client_id=self.client_id,
                ssl_context=client_context_of(self.tls),
            )
        except OSError:
            self.tracker.failed(nid)
            return 0
        self.fetches += 1
        leader = resp.get("leader_id", -1)
        if leader != nid:
            self.tracker.set_leader(leader if leader >= 0 else None, resp.get("leader_endpoint"))
            if leader >= 0:
                return 1  # ask the leader straight away
        code = resp.get("error_code", 0)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE and resp.get("snapshot") is not None:
            with self._lock:
                off = resp["snapshot_offset"]
                self._records.install_snapshot(off, resp["snapshot"])
                self._committed = max(self._committed, off)
                self._records.reset()
            return 1
        if code != 0:
            _log.warning("MetadataFetch from controller %d: error %d", nid, code)
            return 0
        records = [(r["offset"], r["record"]) for r in resp["records"]]
        with self._lock:
            if records:
                self._records.check_room(len(records))
                self._committed = records[-1][0]
            if len(records) < self.max_records:
                self._committed = max(self._committed, resp["high_watermark"] - 1)
            if records:  # listeners see the new committed offset
                self._records.commit(records)
        return len(records)

    # -- MetadataLog ---------------------------------------------------------------------------
    def is_leader(self) -> bool:
        return False

    def append(self, records: list[bytes]) -> int:
        raise NotControllerError("a metadata observer cannot append")

    def committed_offset(self) -> int:
        with self._lock:
            return self._committed

    def end_offset(self) -> int:
        return self.committed_offset()

    def read(self, from_offset: int, max_records: int = 10_000) -> list[tuple[int, bytes]]:
        return self._records.read(from_offset, max_records)

    def add_listener(self, listener: Listener) -> None:
        self._records.add_listener(listener)

    def remove_listener(self, listener: Listener) -> None:
        self._records.remove_listener(listener)

    def log_start_offset(self) -> int:
        with self._lock:
            return self._records.start

    def latest_snapshot(self) -> tuple[int, bytes] | None:
        with self._lock:
            return self._records.snapshot

    def write_snapshot(self, offset: int, data: bytes) -> None:
        with self._lock:
            if self._records.is_newer_snapshot(offset):
                self._records.install_snapshot(offset, data)
