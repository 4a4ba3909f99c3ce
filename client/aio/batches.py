"""The client's one seam to the record batch format: encode producer entries, decode fetched
bytes (client.records' builder and reader).

    encode(entries, compression, timestamp_ms) -> bytes
        entries: [(key, value)] (timestamp_ms for all) or [(key, value, headers, timestamp_ms)]
    decode(buf, check_crc) -> [(offset, timestamp, key, value, headers)]
        every whole batch in buf; a partial trailing batch is dropped
"""

from __future__ import annotations

try:
    from client.records import CODEC_IDS as _NAMES
    from client.records import build_batch as _build
    from client.records import decode_records as _decode
except ImportError:  # INTERIM: until client.records' builder/reader are committed
    from client.aio._interim_records import CODECS as _NAMES  # type: ignore[assignment]
    from client.aio._interim_records import build_batch as _build  # type: ignore[assignment]
    from client.aio._interim_records import decode_batches as _decode  # type: ignore[assignment]

CODECS = tuple(_NAMES)


def encode(entries: list, compression: str, timestamp_ms: int) -> bytes:
    return _build(entries, compression=compression, timestamp_ms=timestamp_ms)


def decode(buf: bytes | memoryview, check_crc: bool = True) -> list:
    return _decode(buf, check_crc)
