"""The client's one seam to the record batch format (client.records' builder and reader).

encode(entries, compression, timestamp_ms) -> bytes
    entries: [(key, value)] (stamped timestamp_ms) or [(key, value, headers, timestamp_ms)]
decode(buf, check_crc) -> [Record(offset, timestamp, key, value, headers)]
    every whole batch in buf; a partial trailing batch is dropped
"""

from __future__ import annotations

from client.records import CODEC_IDS, build_batch, decode_records

CODECS = tuple(CODEC_IDS)


def encode(entries: list, compression: str, timestamp_ms: int) -> bytes:
    return build_batch(entries, compression=compression, timestamp_ms=timestamp_ms)


def decode(buf: bytes | memoryview, check_crc: bool = True) -> list:
    return decode_records(buf, check_crc)
