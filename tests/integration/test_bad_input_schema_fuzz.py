"""Schema-driven fuzzing against a live broker (docs/architecture.md §3: the fuzz tests read the same API
schemas as the codec and the docs).

For every registered API, hypothesis builds request bodies from the declared schema — valid in
shape, random in value (huge ints, empty and odd strings, random bytes where record batches go,
corrupted real batches) — then sometimes breaks them (a required field dropped, a value of the
wrong type). Whatever the broker does with one request (answer with an error, close that
connection), after every example a separate connection must still produce a record and fetch it
back byte for byte.
"""

from __future__ import annotations

import itertools
import random
from pathlib import Path
from typing import Any

import pytest
from helpers import RawClient, broker_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import for_type

from broker.server import BrokerServer
from client.protocol import API_SPECS
from client.protocol.api_keys import ApiKey
from client.protocol.schema import BYTES, INT8, INT16, INT32, INT64, STRING
from client.records import build_batch, decode_records

CANARY = "canary"
_canary_values = itertools.count()


def _ints(lo: int, hi: int) -> st.SearchStrategy:
    """Edges and small values, where bugs live, and anything in range."""
    return st.sampled_from([lo, hi, -1, 0, 1]) | st.integers(min_value=lo, max_value=hi)


def _batches() -> st.SearchStrategy:
    """A real record batch, sometimes with one byte flipped or cut short."""

    @st.composite
    def draw_batch(draw: Any) -> bytes:
        values = draw(st.lists(st.binary(max_size=20), min_size=1, max_size=3))
        raw = bytearray(build_batch([(None, v) for v in values]))
        how = draw(st.sampled_from(["whole", "flip", "cut"]))
        if how == "flip":
            i = draw(st.integers(min_value=0, max_value=len(raw) - 1))
            raw[i] ^= 1 << draw(st.integers(min_value=0, max_value=7))
        elif how == "cut":
            raw = raw[: draw(st.integers(min_value=0, max_value=len(raw) - 1))]
        return bytes(raw)

    return draw_batch()


# Hostile primitives for strategies.for_type: edge integers, odd names, real and damaged batches.
HOSTILE = {
    id(INT8): _ints(-(2**7), 2**7 - 1),
    id(INT16): _ints(-(2**15), 2**15 - 1),
    id(INT32): _ints(-(2**31), 2**31 - 1),
    id(INT64): _ints(-(2**63), 2**63 - 1),
    id(STRING): st.sampled_from([CANARY + "-x", "", "t", "a" * 300, "../etc", "é"])
    | st.text(max_size=12),
    id(BYTES): st.binary(max_size=96) | _batches(),
}


@st.composite
def requests(draw: Any) -> tuple[int, int, Any]:
    spec = draw(st.sampled_from(sorted(API_SPECS.values(), key=lambda s: s.key)))
    version = draw(st.integers(min_value=spec.min_version, max_value=spec.max_version))
    body = draw(for_type(spec.request, version, full=False, primitives=HOSTILE))
    how = draw(st.sampled_from(["valid-shape", "valid-shape", "drop-field", "wrong-type"]))
    if how == "drop-field" and body:
        body.pop(draw(st.sampled_from(sorted(body))))
    elif how == "wrong-type" and body:
        body[draw(st.sampled_from(sorted(body)))] = draw(
            st.sampled_from([[], {}, "s", b"b", 2**64 - 1, None, 1.5])
        )
    return spec.key, version, body


def produce_and_fetch(address: tuple[str, int]) -> None:
    """One record to the canary topic (acks=1) and the same bytes back by Fetch."""
    value = b"canary-%d-%d" % (next(_canary_values), random.getrandbits(32))
    with RawClient(address, timeout=10) as c:
        parts = [{"partition": 0, "records": build_batch([(None, value)])}]
        resp = c.request(
            ApiKey.PRODUCE,
            0,
            {"acks": 1, "timeout_ms": 5000, "topics": [{"name": CANARY, "partitions": parts}]},
        )
        p = resp["topics"][0]["partitions"][0]
        assert p["error_code"] == 0, p
        fetch_part = {
            "partition": 0,
            "fetch_offset": p["base_offset"],
            "partition_max_bytes": 1 << 16,
        }
        resp = c.request(
            ApiKey.FETCH,
            0,
            {
                "replica_id": -1,
                "max_wait_ms": 0,
                "min_bytes": 1,
                "max_bytes": 1 << 20,
                "topics": [{"name": CANARY, "partitions": [fetch_part]}],
            },
            correlation_id=2,
        )
        got = resp["topics"][0]["partitions"][0]
        assert got["error_code"] == 0, got
        records = decode_records(got["records"])
        assert records and records[0].offset == p["base_offset"] and records[0].value == value


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory: pytest.TempPathFactory):
    data: Path = tmp_path_factory.mktemp("schema-fuzz")
    server = BrokerServer(broker_config(data, socket_request_max_bytes=1 << 20, num_io_threads=2))
    address = server.start()
    with RawClient(address) as c:  # the canary topic exists before any fuzzing
        topic = {"name": CANARY, "num_partitions": 1, "replication_factor": 1}
        resp = c.request(ApiKey.CREATE_TOPICS, 0, {"topics": [topic], "timeout_ms": 5000})
        assert resp["topics"][0]["error_code"] == 0, resp
    produce_and_fetch(address)
    yield address
    server.shutdown(timeout=10)


@pytest.mark.slow
@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    print_blob=True,
)
@given(req=requests(), correlation_id=st.integers(min_value=-(2**31), max_value=2**31 - 1))
def test_schema_shaped_requests_never_break_the_broker(fuzz_broker, req, correlation_id) -> None:
    api_key, version, body = req
    with RawClient(fuzz_broker, timeout=10) as c:
        c.send(api_key, version, correlation_id, body)
        # An answer for this correlation id, or the connection closed with a logged reason;
        # acks=0 produces get no answer at all, which the canary below also covers.
        if not (api_key == ApiKey.PRODUCE and isinstance(body, dict) and body.get("acks") == 0):
            try:
                corr, _ = c.recv(timeout=5)
            except AssertionError as exc:
                assert "closed" in str(exc), exc  # closed is fine; silence is not
            else:
                assert corr == correlation_id
    produce_and_fetch(fuzz_broker)
