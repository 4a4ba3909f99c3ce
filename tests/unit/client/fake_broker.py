"""An in-memory single-node broker speaking the native protocol, for client unit tests.

Real sockets and the real codec (client.protocol); the log is a list of batches per partition.
Runs its own event loop on a thread, so sync and asyncio tests can both use it. Faults:
`inject(api_key, code, times)` answers the next partitions with an error code;
`close_connections()` drops every client socket.
"""

from __future__ import annotations

import asyncio
import threading
from collections import defaultdict
from typing import Any

from client.aio.batches import decode
from client.protocol import API_SPECS, ApiKey, FrameDecoder, decode_request, encode_response
from client.records.header import iter_headers, set_base_offset, validate


class FakeBroker:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.topics: dict[str, int] = {}
        self.logs: dict[tuple[str, int], list[bytearray]] = defaultdict(list)
        self.next_offset: dict[tuple[str, int], int] = defaultdict(int)
        self.faults: dict[int, list[int]] = defaultdict(list)
        self.requests: list[tuple[int, dict]] = []
        self._writers: set[asyncio.StreamWriter] = set()
        self._tasks: set[asyncio.Task] = set()
        self._data = None  # asyncio.Condition on the loop
        started = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self.thread.start()
        started.wait(5)
        self.bootstrap = f"127.0.0.1:{self.port}"

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self.loop)

        async def boot() -> None:
            self._data = asyncio.Condition()
            self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
            self.port = self.server.sockets[0].getsockname()[1]
            started.set()

        self.loop.run_until_complete(boot())
        self.loop.run_forever()

    def _call(self, fn: Any, *args: Any) -> Any:
        async def wrap() -> Any:
            return fn(*args)

        return asyncio.run_coroutine_threadsafe(wrap(), self.loop).result(5)

    def create_topic(self, name: str, partitions: int = 1) -> None:
        self._call(self.topics.__setitem__, name, partitions)

    def inject(self, api_key: int, code: int, times: int = 1) -> None:
        self._call(lambda: self.faults[api_key].extend([code] * times))

    def close_connections(self) -> None:
        def close() -> None:
            for w in list(self._writers):
                w.transport.abort()

        self._call(close)

    def stop(self) -> None:
        async def shutdown() -> None:
            self.server.close()
            for w in list(self._writers):
                w.transport.abort()
            tasks = [t for t in self._tasks if not t.done()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shutdown(), self.loop).result(5)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)

    # -- serving -------------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self._writers.add(writer)
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        dec = FrameDecoder()
        try:
            while data := await reader.read(65536):
                for payload in dec.feed(data):
                    key, ver, corr, _cid, body = decode_request(payload)
                    body = API_SPECS[key].check_request(body, ver)
                    self.requests.append((key, body))
                    resp = await getattr(self, f"_h{int(key)}")(body)
                    if resp is not None:
                        writer.write(encode_response(corr, resp))
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._writers.discard(writer)
            self._tasks.discard(task)
            writer.close()

    def _fault(self, key: int) -> int:
        f = self.faults.get(key)
        return f.pop(0) if f else 0

    async def _h18(self, body: dict) -> dict:  # ApiVersions
        keys = [0, 1, 2, 3, 18, 19, 20, 32, 60]
        return {
            "error_code": 0,
            "api_keys": [{"api_key": k, "min_version": 0, "max_version": 0} for k in keys],
        }

    async def _h3(self, body: dict) -> dict:  # Metadata
        names = list(self.topics) if body["topics"] is None else [t["name"] for t in body["topics"]]
        topics = []
        for name in names:
            if name not in self.topics:
                topics.append({"error_code": 3, "name": name, "partitions": []})
                continue
            topics.append(
                {
                    "error_code": 0,
                    "name": name,
                    "partitions": [
                        {
                            "error_code": 0,
                            "partition": p,
                            "leader_id": 1,
                            "leader_epoch": 0,
                            "replica_nodes": [1],
                            "isr_nodes": [1],
                        }
                        for p in range(self.topics[name])
                    ],
                }
            )
        return {
            "brokers": [{"node_id": 1, "host": "127.0.0.1", "port": self.port}],
            "cluster_id": "fake",
            "controller_id": 1,
            "topics": topics,
        }

    async def _h0(self, body: dict) -> dict | None:  # Produce
        out = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                tp = (t["name"], p["partition"])
                code = self._fault(ApiKey.PRODUCE)
                base = -1
                if not code and p["partition"] >= self.topics.get(t["name"], 0):
                    code = 3
                if not code:
                    buf = bytearray(p["records"])
                    base = self.next_offset[tp]
                    for pos, h in list(iter_headers(buf)):
                        validate(buf, pos)
                        batch = bytearray(buf[pos : pos + h.size])
                        set_base_offset(batch, self.next_offset[tp])
                        self.logs[tp].append(batch)
                        self.next_offset[tp] += h.last_offset_delta + 1
                parts.append(
                    {
                        "partition": p["partition"],
                        "error_code": code,
                        "base_offset": base,
                        "log_append_time_ms": -1,
                        "log_start_offset": 0,
                    }
                )
            out.append({"name": t["name"], "partitions": parts})
        async with self._data:
            self._data.notify_all()
        return None if body["acks"] == 0 else {"topics": out}

    def _read(self, tp: tuple[str, int], offset: int, max_bytes: int) -> bytes:
        out = bytearray()
        for b in self.logs.get(tp, []):
            _pos, h = next(iter_headers(b))
            if h.last_offset < offset:
                continue
            if out and len(out) + len(b) > max_bytes:
                break
            out += b
        return bytes(out)

    async def _h1(self, body: dict) -> dict:  # Fetch
        async def collect() -> tuple[list, int]:
            topics, total = [], 0
            for t in body["topics"]:
                parts = []
                for p in t["partitions"]:
                    tp = (t["name"], p["partition"])
                    code = self._fault(ApiKey.FETCH)
                    hw = self.next_offset[tp]
                    data = b""
                    if not code and tp[0] not in self.topics:
                        code = 3
                    elif not code and not 0 <= p["fetch_offset"] <= hw:
                        code = 1
                    elif not code:
                        data = self._read(tp, p["fetch_offset"], p["partition_max_bytes"])
                    total += len(data)
                    parts.append(
                        {
                            "partition": p["partition"],
                            "error_code": code,
                            "high_watermark": hw,
                            "last_stable_offset": hw,
                            "log_start_offset": 0,
                            "records": data,
                        }
                    )
                topics.append({"name": t["name"], "partitions": parts})
            return topics, total

        topics, total = await collect()
        if total < body["min_bytes"] and body["max_wait_ms"] > 0:
            try:
                async with self._data:
                    await asyncio.wait_for(self._data.wait(), body["max_wait_ms"] / 1000)
            except TimeoutError:
                pass
            topics, total = await collect()
        return {"error_code": 0, "session_id": 0, "topics": topics}

    async def _h2(self, body: dict) -> dict:  # ListOffsets
        out = []
        for t in body["topics"]:
            parts = []
            for p in t["partitions"]:
                tp = (t["name"], p["partition"])
                ts = p["timestamp"]
                code = self._fault(ApiKey.LIST_OFFSETS) or (0 if t["name"] in self.topics else 3)
                if ts == -2:
                    off = 0
                elif ts == -1:
                    off = self.next_offset[tp]
                else:
                    off = next(
                        (r[0] for b in self.logs.get(tp, []) for r in decode(b) if r[1] >= ts), -1
                    )
                parts.append(
                    {
                        "partition": p["partition"],
                        "error_code": code,
                        "timestamp": -1,
                        "offset": off,
                        "leader_epoch": 0,
                    }
                )
            out.append({"name": t["name"], "partitions": parts})
        return {"topics": out}

    async def _h19(self, body: dict) -> dict:  # CreateTopics
        out = []
        for t in body["topics"]:
            code = 36 if t["name"] in self.topics else 0
            if not code and not body["validate_only"]:
                self.topics[t["name"]] = max(1, t["num_partitions"])
            out.append(
                {
                    "name": t["name"],
                    "error_code": code,
                    "num_partitions": t["num_partitions"],
                    "replication_factor": 1,
                }
            )
        return {"topics": out}

    async def _h20(self, body: dict) -> dict:  # DeleteTopics
        out = []
        for name in body["topic_names"]:
            code = 0 if self.topics.pop(name, None) is not None else 3
            out.append({"name": name, "error_code": code})
        return {"responses": out}

    async def _h60(self, body: dict) -> dict:  # DescribeCluster
        return {
            "error_code": 0,
            "cluster_id": "fake",
            "controller_id": 1,
            "brokers": [{"broker_id": 1, "host": "127.0.0.1", "port": self.port}],
        }

    async def _h32(self, body: dict) -> dict:  # DescribeConfigs
        return {
            "results": [
                {
                    "error_code": 0,
                    "resource_type": r["resource_type"],
                    "resource_name": r["resource_name"],
                    "configs": [
                        {
                            "name": "retention.ms",
                            "value": "604800000",
                            "read_only": False,
                            "is_default": True,
                            "is_sensitive": False,
                        }
                    ],
                }
                for r in body["resources"]
            ]
        }
