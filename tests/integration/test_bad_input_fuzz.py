"""Hypothesis against a live broker: random bytes, random frames, random requests. Whatever
arrives, the broker answers or closes that one connection, and keeps serving everybody else."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

import msgpack
import pytest
from helpers import RawClient, api_versions_ok, broker_config
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import msgpack_values

from broker.server import BrokerServer
from client.protocol import API_SPECS
from client.protocol.framing import encode_request

MAX_BYTES = 16 * 1024

api_keys = st.sampled_from(sorted(API_SPECS)) | st.integers(min_value=-5, max_value=2000)


@st.composite
def requests(draw) -> bytes:
    key = draw(api_keys)
    version = draw(st.integers(min_value=-1, max_value=5))
    corr = draw(st.integers(min_value=-(2**31), max_value=2**31 - 1))
    body = draw(st.dictionaries(st.text(max_size=12), msgpack_values, max_size=5))
    return encode_request(key, version, corr, draw(st.none() | st.text(max_size=8)), body)


frames = st.one_of(
    st.binary(min_size=1, max_size=200),  # raw garbage
    st.builds(  # a well-framed payload of random msgpack
        lambda v: (lambda p: struct.pack(">I", len(p)) + p)(msgpack.packb(v, use_bin_type=True)),
        msgpack_values,
    ),
    requests(),  # a request-shaped frame with a random body
    st.lists(requests(), min_size=2, max_size=4).map(b"".join),  # pipelined
    st.integers(min_value=MAX_BYTES + 1, max_value=2**32 - 1).map(lambda n: struct.pack(">I", n)),
)


def _first_reaction(sock: socket.socket, timeout: float) -> None:
    sock.settimeout(timeout)
    try:
        sock.recv(1 << 16)
    except (TimeoutError, ConnectionResetError):
        pass  # no reaction in time (partial frame), or a reset: both fine here


@pytest.fixture(scope="module")
def fuzz_broker(tmp_path_factory):
    data: Path = tmp_path_factory.mktemp("fuzz")
    cfg = broker_config(data, socket_request_max_bytes=MAX_BYTES, num_io_threads=2)
    server = BrokerServer(cfg)
    address = server.start()
    yield address
    server.shutdown(timeout=10)


@pytest.mark.slow
@settings(
    max_examples=120,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    print_blob=True,
)
@given(data=frames)
def test_random_input_never_breaks_the_broker(fuzz_broker, data: bytes) -> None:
    with RawClient(fuzz_broker, timeout=5) as c:
        c.send_raw(data)
        # An answer arrives or the connection is closed; a partial frame just waits. Read until
        # the first of those (bounded), then hang up.
        _first_reaction(c.sock, 0.1)
    api_versions_ok(fuzz_broker)
