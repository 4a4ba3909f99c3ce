"""Record batch encode/decode throughput (records/s), per codec. Prints JSON.

    .venv/bin/python scripts/bench/records_bench.py [--records N] [--batch N] [--value-bytes N]

Each row builds batches of `--batch` records (100-byte values, 8-byte keys) with build_batch
and decodes them with decode_batch (CRC checked, and again without the CRC check); the best of `--repeat` passes is reported,
since other processes share the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", ".."))

from client.records import build_batch, decode_batch, is_available  # noqa: E402
from client.records.crc import BACKEND, require_c_extension  # noqa: E402


def run(codec: str, total: int, batch: int, value_bytes: int, repeat: int) -> dict:
    value = os.urandom(value_bytes // 2).hex().encode()[:value_bytes]
    chunks = [
        [(b"key%05d" % ((j + i) % 100000), value) for i in range(batch)]
        for j in range(0, total, batch)
    ]
    n = sum(len(c) for c in chunks)
    best_enc = best_dec = best_nocrc = float("inf")
    batches: list[bytes] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        batches = [
            build_batch(c, compression=codec, timestamp_ms=1_700_000_000_000) for c in chunks
        ]
        best_enc = min(best_enc, time.perf_counter() - t0)
        t0 = time.perf_counter()
        decoded = 0
        for b in batches:
            decoded += len(decode_batch(b))
        best_dec = min(best_dec, time.perf_counter() - t0)
        assert decoded == n
        t0 = time.perf_counter()
        for b in batches:
            decode_batch(b, check_crc=False)
        best_nocrc = min(best_nocrc, time.perf_counter() - t0)
    size = sum(len(b) for b in batches)
    return {
        "codec": codec,
        "records": n,
        "batch_records": batch,
        "value_bytes": value_bytes,
        "encode_records_per_s": round(n / best_enc),
        "decode_records_per_s": round(n / best_dec),
        "decode_no_crc_records_per_s": round(n / best_nocrc),
        "encoded_bytes_per_record": round(size / n, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--repeat", type=int, default=3)
    args = p.parse_args()
    require_c_extension()
    rows = []
    for codec in ("none", "gzip", "lz4", "zstd"):
        if not is_available(codec):
            rows.append({"codec": codec, "skipped": "codec package not installed"})
            continue
        rows.append(run(codec, args.records, args.batch, args.value_bytes, args.repeat))
    out = {"bench": "records", "cpus": os.cpu_count(), "crc_backend": BACKEND, "rows": rows}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
