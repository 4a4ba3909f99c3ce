"""`gregor consume TOPIC`: print record values (optionally keys) one per line."""

from __future__ import annotations

import argparse
import sys
import time

from client.cli.common import add_bootstrap, client_config, reports_errors


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("consume", help="print records of a topic")
    p.add_argument("topic")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (default: only new records)",
    )
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("--partition", type=int, help="read only this partition")
    p.add_argument("--offset", type=int, help="start offset (with --partition)")
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    p.add_argument("--print-key", action="store_true", help="print KEY<sep>VALUE")
    p.add_argument("--key-separator", default="\t", metavar="SEP")
    p.add_argument("--group", help="consumer group id (stored; groups come later)")
    add_bootstrap(p)
    p.set_defaults(func=_consume)


@reports_errors
def _consume(args: argparse.Namespace) -> int:
    from client import Consumer, TopicPartition

    if args.offset is not None and args.partition is None:
        raise SystemExit("--offset needs --partition")
    reset = "earliest" if args.from_beginning else "latest"
    cfg = client_config(args, **{"auto.offset.reset": reset, "group.id": args.group})
    out = sys.stdout.buffer
    sep = args.key_separator.encode()
    count = 0
    with Consumer(cfg) as consumer:
        if args.partition is not None:
            tp = TopicPartition(args.topic, args.partition)
            consumer.assign([tp])
            if args.offset is not None:
                consumer.seek(tp, args.offset)
        else:
            consumer.subscribe([args.topic])
        last = time.monotonic()
        try:
            while args.max_messages is None or count < args.max_messages:
                records = consumer.poll(timeout_ms=200)
                if not records:
                    if (
                        args.timeout_ms is not None
                        and (time.monotonic() - last) * 1000 >= args.timeout_ms
                    ):
                        break
                    continue
                last = time.monotonic()
                for r in records:
                    if args.print_key:
                        out.write((r.key or b"null") + sep)
                    out.write((r.value or b"") + b"\n")
                    count += 1
                    if args.max_messages is not None and count >= args.max_messages:
                        break
                out.flush()
        except BrokenPipeError:
            return 0
    print(f"Processed {count} records.", file=sys.stderr)
    return 0
