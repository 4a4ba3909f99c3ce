"""Record batches: the wire = disk format of docs/architecture.md §4.

    build_batch(records, base_offset=0, compression="none", ...) -> bytes
    BatchBuilder(compression="none", ..., max_bytes=1048576).append(key, value, headers, ts)
    decode_batch(buf, pos=0, check_crc=True) -> list[Record]
    decode_records(buf) -> list[Record]           # many concatenated batches
    decode_partition_records(buf, topic, partition) -> list[ConsumerRecord]  # one pass, for consumers
    iter_batches(buf) -> Iterator[(BatchHeader, memoryview)]

Header-level helpers (parse_header, validate, set_base_offset, set_partition_leader_epoch,
iter_headers) live in client.records.header. Byte layout: docs/record-format.md.
"""

from client.records.builder import BatchBuilder, build_batch
from client.records.compression import CODEC_IDS, CODEC_NAMES, codec_id, is_available
from client.records.header import (
    HEADER_SIZE,
    BatchHeader,
    iter_headers,
    parse_header,
    set_base_offset,
    set_partition_leader_epoch,
    validate,
)
from client.records.reader import (
    decode_batch,
    decode_partition_records,
    decode_records,
    iter_batches,
    next_offset,
    next_offset_and_epoch,
)
from client.records.record import ConsumerRecord, Record

__all__ = [
    "CODEC_IDS",
    "CODEC_NAMES",
    "HEADER_SIZE",
    "BatchBuilder",
    "BatchHeader",
    "ConsumerRecord",
    "Record",
    "build_batch",
    "codec_id",
    "decode_batch",
    "decode_partition_records",
    "decode_records",
    "is_available",
    "iter_batches",
    "iter_headers",
    "next_offset",
    "next_offset_and_epoch",
    "parse_header",
    "set_base_offset",
    "set_partition_leader_epoch",
    "validate",
]
