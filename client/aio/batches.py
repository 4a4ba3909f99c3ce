"""The client's one seam to the record batch format: encode producer entries, decode fetched
bytes. Uses client.records' builder/reader; falls back to `_interim_records` until they land.

    encode(entries, compression) -> bytes      entries: [(timestamp_ms, key, value, headers)]
    decode(buf, check_crc) -> [(offset, timestamp, key, value, headers)]   whole batches only;
                                                                           a partial tail is dropped
"""

from __future__ import annotations

from client.aio import _interim_records

encode = _interim_records.build_batch
decode = _interim_records.decode_batches
CODECS = tuple(_interim_records.CODECS)
