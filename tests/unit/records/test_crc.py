"""CRC-32C: the active backend agrees with crcmod and with the standard check value."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.records import crc


def test_check_value():
    # CRC-32C of b"123456789" (RFC 3720 / the catalogue's check value).
    assert crc.crc32c(b"123456789") == 0xE3069283
    assert crc.crcmod_crc32c(b"123456789") == 0xE3069283
    assert crc.BACKEND in ("google-crc32c+sse4.2", "sse4.2", "crcmod", "google-crc32c")
    assert crc.has_c_extension()


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=2000), cut=st.integers(0, 2000))
def test_backend_matches_crcmod_incrementally_and_on_views(data, cut):
    cut = min(cut, len(data))
    want = crc.crcmod_crc32c(data)
    assert crc.crc32c(data) == want
    assert crc.crc32c(memoryview(data)[cut:], crc.crc32c(bytearray(data[:cut]))) == want


@settings(max_examples=200, deadline=None)
@given(data=st.binary(max_size=3000), cut=st.integers(0, 3000), start=st.integers(0, 2**32 - 1))
def test_sse42_matches_crcmod_on_any_buffer(crc_hw, data, cut, start):
    hw = crc_hw
    cut = min(cut, len(data))
    assert hw.crc32c(data, start) == crc.crcmod_crc32c(data, start)
    buf = bytearray(data)
    assert hw.crc32c(memoryview(buf)[cut:], hw.crc32c(buf[:cut])) == crc.crcmod_crc32c(data)


def test_sse42_three_streams_on_large_inputs_at_every_alignment(crc_hw):
    """From 1 MiB the C code splits the input in three streams joined by crc32c_combine."""
    hw = crc_hw
    rng = random.Random(7)
    print("seed 7")
    big = rng.randbytes(3 * (1 << 20) + 64)
    for n in (1 << 20, (1 << 20) + 1, (1 << 20) + 23, 3 * (1 << 20) + 5):
        for offset in (0, 1, 3, 8):
            view = memoryview(big)[offset : offset + n]
            for start in (0, 0xFFFFFFFF, 0x12345678):
                assert hw.crc32c(view, start) == crc.crcmod_crc32c(bytes(view), start), (n, offset)


def test_sse42_argument_errors_and_selection(crc_hw):
    hw = crc_hw
    with pytest.raises(ValueError):
        hw.crc32c(b"x", 2**32)
    with pytest.raises((TypeError, BufferError)):
        hw.crc32c(memoryview(b"abcdef")[::2])  # not contiguous
    with pytest.raises(TypeError):
        hw.crc32c("text")
    assert crc.BACKEND in ("google-crc32c+sse4.2", "sse4.2")
    view = memoryview(bytearray(b"123456789"))
    assert crc.crc32c(view) == crc.crc32c(b"123456789") == 0xE3069283
    env = {k: v for k, v in os.environ.items() if k != "GREGOR_NO_EXTENSIONS"}
    code = "from client.records import crc; print(crc.BACKEND)"
    out = subprocess.run([sys.executable, "-c", code], env={**env, "GREGOR_NO_EXTENSIONS": "1"},
                         capture_output=True, text=True, timeout=60, check=True)  # fmt: skip
    assert out.stdout.strip() in ("google-crc32c", "crcmod")


def test_google_takes_bytes_and_the_sse42_loop_takes_views(monkeypatch):
    if crc.BACKEND != "google-crc32c+sse4.2":
        pytest.skip(f"backend {crc.BACKEND}")
    calls: list[int] = []
    real = crc._hw

    def spy(data: Any, start: int = 0) -> int:
        calls.append(len(data))
        return real(data, start)

    monkeypatch.setattr(crc, "_hw", spy)
    assert crc.crc32c(b"123456789") == 0xE3069283 and calls == []
    assert crc.crc32c(memoryview(b"x123456789")[1:]) == 0xE3069283 and calls == [9]
    assert crc.crc32c(bytearray(b"123456789")) == 0xE3069283 and calls == [9, 9]
