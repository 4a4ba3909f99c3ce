"""Record batch encode/decode throughput (records/s), per codec. Prints JSON.

    .venv/bin/python scripts/bench/records_bench.py [--records N] [--batch N] [--value-bytes N]
        [--fetch-bytes N] [--repeat N] [--codecs none,gzip,lz4,zstd] [--decoder c|python]

Each row builds batches of `--batch` records (100-byte values, 8-byte keys, one timestamp) with
build_batch (what the producer's sender does), then decodes them three ways:

- decode_records_per_s: what a consumer does with a fetch response: the batches concatenated
  into `--fetch-bytes` buffers (the consumer's max.partition.fetch.bytes default, 1 MiB), each
  decoded whole by decode_records with the CRC checked (check.crcs=true, Kafka's default); the
  records of one fetch stay alive until the next fetch is decoded, as in a consumer's buffer.
  This is the headline decode figure.
- decode_batch_per_s: decode_batch on each batch alone, CRC checked.
- decode_no_crc_records_per_s: decode_records as above with check_crc=False.

The cyclic GC stays enabled in the timed loops (the library pauses it inside a decode; any
collection that triggers later in the loop is timed too). Times are wall clock; the best of
`--repeat` passes is reported, since other processes share the CPU (the load average at the
start is reported, and cpu_s is the process CPU time of the best decode_records pass).

--decoder picks the records-section decoder and encoder (client.records.reader.DECODER and
client.records.builder.ENCODER, reported as "decoder" and "encoder"): c (the optional C
extension; an error when it is not built) or python (as GREGOR_NO_EXTENSIONS=1). Default:
whichever the library selects by itself.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


def _select_decoder(argv: list[str]) -> None:
    """Set GREGOR_NO_EXTENSIONS from --decoder before client.records is imported."""
    for i, a in enumerate(argv):
        value = a.split("=", 1)[1] if a.startswith("--decoder=") else None
        if a == "--decoder" and i + 1 < len(argv):
            value = argv[i + 1]
        if value == "python":
            os.environ["GREGOR_NO_EXTENSIONS"] = "1"
        elif value == "c":
            os.environ.pop("GREGOR_NO_EXTENSIONS", None)


_select_decoder(sys.argv[1:])

from client.records import build_batch, decode_batch, decode_records, is_available  # noqa: E402
from client.records.builder import ENCODER  # noqa: E402
from client.records.crc import BACKEND, require_c_extension  # noqa: E402
from client.records.reader import DECODER  # noqa: E402

CODECS = ("none", "gzip", "lz4", "zstd")


def fetch_buffers(batches: list[bytes], fetch_bytes: int) -> list[bytes]:
    """The batches grouped into buffers of at most `fetch_bytes` (at least one batch each)."""
    out: list[bytes] = []
    cur: list[bytes] = []
    size = 0
    for b in batches:
        if cur and size + len(b) > fetch_bytes:
            out.append(b"".join(cur))
            cur, size = [], 0
        cur.append(b)
        size += len(b)
    if cur:
        out.append(b"".join(cur))
    return out


def _time_decode_records(fetches: list[bytes], check_crc: bool) -> tuple[float, float, int]:
    held: list = []
    n = 0
    c0 = time.process_time()
    t0 = time.perf_counter()
    for buf in fetches:
        held = decode_records(buf, check_crc)  # the previous fetch's records are freed here
        n += len(held)
    dt = time.perf_counter() - t0
    cpu = time.process_time() - c0
    del held
    return dt, cpu, n


def run(
    codec: str, total: int, batch: int, value_bytes: int, fetch_bytes: int, repeat: int
) -> dict:
    value = os.urandom(value_bytes // 2 + 1).hex().encode()[:value_bytes]
    chunks = [
        [(b"key%05d" % ((j + i) % 100000), value) for i in range(min(batch, total - j))]
        for j in range(0, total, batch)
    ]
    n = sum(len(c) for c in chunks)
    best_enc = best_dec = best_dec_cpu = best_batch = best_nocrc = float("inf")
    batches: list[bytes] = []
    fetches: list[bytes] = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        batches = [
            build_batch(c, compression=codec, timestamp_ms=1_700_000_000_000) for c in chunks
        ]
        best_enc = min(best_enc, time.perf_counter() - t0)
        if not fetches:
            fetches = fetch_buffers(batches, fetch_bytes)
        dt, cpu, decoded = _time_decode_records(fetches, True)
        assert decoded == n
        if dt < best_dec:
            best_dec, best_dec_cpu = dt, cpu
        t0 = time.perf_counter()
        decoded = 0
        for b in batches:
            decoded += len(decode_batch(b))
        best_batch = min(best_batch, time.perf_counter() - t0)
        assert decoded == n
        dt, _, decoded = _time_decode_records(fetches, False)
        assert decoded == n
        best_nocrc = min(best_nocrc, dt)
    size = sum(len(b) for b in batches)
    return {
        "codec": codec,
        "records": n,
        "batch_records": batch,
        "value_bytes": value_bytes,
        "fetch_buffers": len(fetches),
        "encode_records_per_s": round(n / best_enc),
        "decode_records_per_s": round(n / best_dec),
        "decode_records_cpu_s": round(best_dec_cpu, 4),
        "decode_batch_per_s": round(n / best_batch),
        "decode_no_crc_records_per_s": round(n / best_nocrc),
        "encoded_bytes_per_record": round(size / n, 1),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--records", type=int, default=200_000)
    p.add_argument("--batch", type=int, default=1000)
    p.add_argument("--value-bytes", type=int, default=100)
    p.add_argument("--fetch-bytes", type=int, default=1 << 20)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--codecs", default=",".join(CODECS))
    p.add_argument("--decoder", choices=("c", "python"), help="default: the library's choice")
    args = p.parse_args()
    require_c_extension()
    if args.decoder and args.decoder != DECODER:
        sys.exit(f"--decoder {args.decoder}: the library selected {DECODER} (extension not built?)")
    load = os.getloadavg()
    rows = []
    for codec in args.codecs.split(","):
        if not is_available(codec):
            rows.append({"codec": codec, "skipped": "codec package not installed"})
            continue
        rows.append(
            run(codec, args.records, args.batch, args.value_bytes, args.fetch_bytes, args.repeat)
        )
    out = {
        "bench": "records",
        "cpus": os.cpu_count(),
        "load_avg_1m_at_start": round(load[0], 2),
        "crc_backend": BACKEND,
        "decoder": DECODER,
        "encoder": ENCODER,
        "rows": rows,
    }
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
