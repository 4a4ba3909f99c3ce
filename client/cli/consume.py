"""`gregor consume TOPIC`: print record values (optionally keys) one per line."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors


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
    p.add_argument(
        "--group",
        help="consume as a member of this group: resume at its committed offsets (else"
        " --from-beginning / auto.offset.reset) and commit what was printed",
    )
    add_bootstrap(p)
    p.set_defaults(func=_consume)


@reports_errors
def _consume(args: argparse.Namespace) -> int:
    from client import Consumer, TopicPartition

    if args.offset is not None and args.partition is None:
        raise SystemExit("--offset needs --partition")
    if args.group is not None and args.partition is not None:
        raise SystemExit("--group reads the partitions the group assigns: drop --partition")
    cfg = client_config(args, **{"group.id": args.group})
    # --from-beginning wins; else -X auto.offset.reset; else only new records (Kafka's tool).
    explicit_reset = "auto.offset.reset" in cfg
    if args.from_beginning:
        cfg["auto.offset.reset"] = "earliest"
    cfg.setdefault("auto.offset.reset", "latest")
    if args.timeout_ms is not None:  # bounds the metadata waits too
        cfg.setdefault("request.timeout.ms", max(1, args.timeout_ms))
    out = sys.stdout.buffer
    sep = args.key_separator.encode()
    count = 0
    with Consumer(cfg) as consumer:
        if args.partition is not None:
            tp = TopicPartition(args.topic, args.partition)
            _check_partition(consumer, tp)
            consumer.assign([tp])
            if args.offset is not None:
                consumer.seek(tp, _start_offset(consumer, tp, args.offset, explicit_reset))
        else:
            _check_partition(consumer, None, args.topic)
            consumer.subscribe([args.topic])
        last = time.monotonic()
        try:
            while args.max_messages is None or count < args.max_messages:
                # (max_records: with --group, close() commits exactly what was printed)
                left = None if args.max_messages is None else args.max_messages - count
                records = consumer.poll(timeout_ms=200, max_records=left)
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


def _check_partition(consumer: Any, tp: Any, topic: str | None = None) -> None:
    """Fail at once, naming what exists, for a topic or partition that does not."""
    topic = tp.topic if tp is not None else topic
    if topic not in consumer.topics():
        raise CommandError(f"topic {topic!r} does not exist (gregor topics list shows the topics)")
    parts = sorted(consumer.partitions_for_topic(topic))
    if tp is not None and tp.partition not in parts:
        raise CommandError(
            f"topic {topic!r} has {len(parts)} partition(s), {_span(parts)}: there is no"
            f" partition {tp.partition}"
        )


def _span(parts: list[int]) -> str:
    return f"{parts[0]}..{parts[-1]}" if parts else "none"


def _start_offset(consumer: Any, tp: Any, offset: int, explicit_reset: bool) -> int:
    """`offset` if it lies in [log start, log end]; else an error naming the valid range, or,
    with -X auto.offset.reset=earliest|latest given, that end (said on stderr)."""
    start = consumer.beginning_offsets([tp])[tp]
    end = consumer.end_offsets([tp])[tp]
    if start <= offset <= end:
        return offset
    where = f"{tp.topic}-{tp.partition}"
    policy = consumer.config.auto_offset_reset
    if explicit_reset and policy in ("earliest", "latest"):
        chosen = start if policy == "earliest" else end
        print(
            f"offset {offset} is out of range for {where} (valid: {start}..{end});"
            f" auto.offset.reset={policy}: starting at {chosen}",
            file=sys.stderr,
        )
        return chosen
    raise CommandError(
        f"offset {offset} is out of range for {where}: valid offsets are {start}..{end}"
        f" ({start} is the log start, {end} the next offset to be written); pass an --offset"
        " in that range, --from-beginning, or -X auto.offset.reset=earliest|latest"
    )
