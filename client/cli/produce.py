"""`gregor produce TOPIC`: one record per stdin line (`--key-separator SEP` splits key/value)."""

from __future__ import annotations

import argparse
import sys

from client.cli.common import add_bootstrap, client_config, reports_errors


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("produce", help="send stdin lines as records")
    p.add_argument("topic")
    p.add_argument(
        "--key-separator", metavar="SEP", help="split each line at the first SEP into key and value"
    )
    p.add_argument("--partition", type=int, help="send every record to this partition")
    p.add_argument("--acks", choices=["all", "-1", "0", "1"], default="all")
    p.add_argument("--compression", choices=["none", "gzip", "lz4", "zstd"], default=None)
    add_bootstrap(p)
    p.set_defaults(func=_produce)


@reports_errors
def _produce(args: argparse.Namespace) -> int:
    from client import Producer

    cfg = client_config(args, acks=args.acks, **{"compression.type": args.compression})
    sep = args.key_separator.encode() if args.key_separator else None
    count = 0
    with Producer(cfg) as producer:
        futures = []
        for raw in sys.stdin.buffer:
            line = raw.rstrip(b"\r\n")
            key = None
            if sep is not None:
                key, found, value = line.partition(sep)
                if not found:
                    key, value = None, line
            else:
                value = line
            futures.append(producer.send(args.topic, value, key=key, partition=args.partition))
            count += 1
            if len(futures) >= 10_000:
                for f in futures:
                    f.result()
                futures.clear()
        producer.flush()
        for f in futures:
            f.result()
    print(f"Produced {count} records to {args.topic}.", file=sys.stderr)
    return 0
