"""confluent-kafka through the Kafka listener against Gregor's client through the native one.
Prints JSON.

    .venv/bin/python scripts/bench/kafka_listener_bench.py [--records N] [--value-bytes N]
        [--partitions N]

One `gregor server` with `listeners: GREGOR://127.0.0.1:P1,KAFKA://127.0.0.1:P2`. Per side, a
topic of `--partitions` partitions created the same way; `--records` records of
`--value-bytes` bytes (no key), acks=all, produced then consumed back whole:

- gregor: Gregor's Producer (send() per record, linger 5 ms) and Consumer (assign, poll)
  on the native listener;
- kafka: confluent-kafka's Producer (produce() per record, linger 5 ms, idempotence on,
  its default) and Consumer (assign, consume(10000)) on the Kafka listener.

Wall-clock records/s per phase, the broker's CPU seconds in each phase (from /proc), and the
Kafka side's ratio to the native side (the issue's goal: >= 0.6). One run.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _proc import cpu_seconds
from _server import start_server, stop_server


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _phase(pid: int, fn) -> tuple[float, float]:
    c0, t0 = cpu_seconds(pid), time.perf_counter()
    fn()
    return time.perf_counter() - t0, cpu_seconds(pid) - c0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--value-bytes", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=3)
    args = ap.parse_args()
    import confluent_kafka as ck

    from client import Admin, Consumer, Producer, TopicPartition

    n, value = args.records, b"x" * args.value_bytes
    gport, kport = _free_port(), _free_port()
    listeners = f"GREGOR://127.0.0.1:{gport},KAFKA://127.0.0.1:{kport}"
    data = tempfile.mkdtemp(prefix="kafka-listener-bench-")
    server = start_server(data, ["--override", f"listeners={listeners}"])
    pid = server.proc.pid
    # (start_server's --port 0 gives the first listener an ephemeral port: it says which)
    gregor, kafka = server.bootstrap, f"127.0.0.1:{kport}"
    out: dict = {"bench": "kafka_listener", "records": n, "value_bytes": args.value_bytes,
                 "partitions": args.partitions, "loadavg": os.getloadavg()[0]}  # fmt: skip
    try:
        with Admin(bootstrap_servers=gregor) as admin:
            admin.create_topic("native", partitions=args.partitions)
            admin.create_topic("kafka", partitions=args.partitions)
        tps = [TopicPartition("native", p) for p in range(args.partitions)]

        def native_produce() -> None:
            with Producer(bootstrap_servers=gregor, acks="all", linger_ms=5) as p:
                for _ in range(n):
                    p.send("native", value)
                p.flush()

        def native_consume() -> None:
            got = 0
            with Consumer(bootstrap_servers=gregor) as c:
                c.assign(tps)
                c.seek_to_beginning()
                while got < n:
                    got += len(c.poll(1.0))

        def kafka_produce() -> None:
            p = ck.Producer({"bootstrap.servers": kafka, "acks": "all", "linger.ms": 5,
                             "enable.idempotence": True})  # fmt: skip
            for i in range(n):
                while True:
                    try:
                        p.produce("kafka", value)
                        break
                    except BufferError:
                        p.poll(0.05)
                if i % 10_000 == 0:
                    p.poll(0)
            assert p.flush(120) == 0

        def kafka_consume() -> None:
            c = ck.Consumer({"bootstrap.servers": kafka, "group.id": "bench",
                             "enable.auto.commit": False})  # fmt: skip
            c.assign([ck.TopicPartition("kafka", p, 0) for p in range(args.partitions)])
            got = 0
            while got < n:
                got += sum(1 for m in c.consume(10_000, 1.0) if m.error() is None)
            c.close()

        for name, fn in (("gregor_produce", native_produce), ("gregor_consume", native_consume),
                         ("kafka_produce", kafka_produce), ("kafka_consume", kafka_consume)):  # fmt: skip
            wall, cpu = _phase(pid, fn)
            out[name] = {"records_per_s": round(n / wall), "wall_s": round(wall, 2),
                         "broker_cpu_s": round(cpu, 2)}  # fmt: skip
        for what in ("produce", "consume"):
            out[f"{what}_ratio"] = round(
                out[f"kafka_{what}"]["records_per_s"] / out[f"gregor_{what}"]["records_per_s"], 2
            )
    finally:
        stop_server(server.proc)
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
