"""CRC-32C: the active backend agrees with crcmod and with the standard check value."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from client.records import crc


def test_check_value():
    # CRC-32C of b"123456789" (RFC 3720 / the catalogue's check value).
    assert crc.crc32c(b"123456789") == 0xE3069283
    assert crc.crcmod_crc32c(b"123456789") == 0xE3069283
    assert crc.BACKEND in ("crcmod", "google-crc32c")
    assert crc.has_c_extension()


@settings(max_examples=100, deadline=None)
@given(data=st.binary(max_size=2000), cut=st.integers(0, 2000))
def test_backend_matches_crcmod_incrementally_and_on_views(data, cut):
    cut = min(cut, len(data))
    want = crc.crcmod_crc32c(data)
    assert crc.crc32c(data) == want
    assert crc.crc32c(memoryview(data)[cut:], crc.crc32c(bytearray(data[:cut]))) == want
