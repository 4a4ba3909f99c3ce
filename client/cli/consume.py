"""`gregor consume TOPIC`: print records one per line: values, Kafka console-consumer columns
(--print-key/-timestamp/-partition/-offset/-headers), a kcat format string (-f) or kcat's JSON
envelope (-J); client/cli/formats.py has the details."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from client.cli.common import (
    CommandError,
    Progress,
    add_bootstrap,
    client_config,
    on_terminal,
    reports_errors,
)
from client.cli.formats import FormatError, compile_format, kafka_columns, render, to_json
from client.records.record import ConsumerRecord

if TYPE_CHECKING:
    from client import Consumer, TopicPartition


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "consume",
        help="print records of a topic",
        description="Print a topic's records on stdout, one per line (the value; --print-* add "
        "Kafka console-consumer columns, -f/--format takes a kcat format string, -J/--json "
        "prints kcat's JSON envelope).",
        epilog="format tokens: %s value, %S value length, %k key, %K key length, %t topic, "
        "%p partition, %o offset, %T timestamp (ms), %h headers (n=v,...), %% a percent "
        "sign; escapes \\n \\r \\t \\xHH. Nothing is added: end the format with \\n. "
        "Example: -f '%t [%p] at offset %o: key %k: %s\\n'",
    )
    p.add_argument("topic", help="the topic to read")
    p.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (default: only new records)",
    )
    p.add_argument("--max-messages", type=int, help="exit after this many records")
    p.add_argument("-p", "--partition", type=int, help="read only this partition")
    p.add_argument("--offset", type=int, help="start offset (with --partition)")
    p.add_argument("--timeout-ms", type=int, help="exit when no record arrives for this long")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument(
        "-f",
        "--format",
        metavar="FMT",
        help="print each record through a kcat format string (tokens below)",
    )
    shape.add_argument(
        "-J",
        "--json",
        action="store_true",
        help="print one JSON object per record, with kcat's fields: topic, partition, offset,"
        " tstype, ts, headers, key, payload",
    )
    p.add_argument(
        "--print-timestamp", action="store_true", help="print CreateTime:TS before the value"
    )
    p.add_argument(
        "--print-partition", action="store_true", help="print Partition:N before the value"
    )
    p.add_argument("--print-offset", action="store_true", help="print Offset:N before the value")
    p.add_argument(
        "--print-headers",
        action="store_true",
        help="print the headers as k:v,k:v (NO_HEADERS when none) before the value",
    )
    p.add_argument("--print-key", action="store_true", help="print the key (null when none)")
    p.add_argument(
        "--key-separator",
        default="\t",
        metavar="SEP",
        help="what separates the --print-* columns (default: a tab)",
    )
    p.add_argument(
        "--group",
        help="consume as a member of this group: resume at its committed offsets (else"
        " --from-beginning / auto.offset.reset) and commit what was printed",
    )
    add_bootstrap(p)
    p.set_defaults(func=_consume)


def _writer(args: argparse.Namespace) -> Callable[[ConsumerRecord], bytes]:
    """How each record becomes bytes on stdout, from --format / --json / --print-*."""
    columns = {
        "timestamp": args.print_timestamp,
        "partition": args.print_partition,
        "offset": args.print_offset,
        "headers": args.print_headers,
        "key": args.print_key,
    }
    chosen = [f"--print-{k}" for k, v in columns.items() if v]
    if chosen and (args.format is not None or args.json):
        raise CommandError(
            f"{' '.join(chosen)} and {'--json' if args.json else '--format'} both say what to"
            " print: give one (a format string can hold every field)"
        )
    if args.json:
        return to_json
    if args.format is not None:
        try:
            pieces = compile_format(args.format)
        except FormatError as exc:
            raise CommandError(f"--format {args.format!r}: {exc}") from None
        return lambda r: render(pieces, r)
    return kafka_columns(separator=args.key_separator.encode(), **columns)


@reports_errors
def _consume(args: argparse.Namespace) -> int:
    from client import Consumer, TopicPartition

    if args.offset is not None and args.partition is None:
        raise SystemExit("--offset needs --partition")
    if args.group is not None and args.partition is not None:
        raise SystemExit("--group reads the partitions the group assigns: drop --partition")
    write_record = _writer(args)
    cfg = client_config(args, **{"group.id": args.group})
    # --from-beginning wins; else -X auto.offset.reset; else only new records (Kafka's tool).
    explicit_reset = "auto.offset.reset" in cfg
    if args.from_beginning:
        cfg["auto.offset.reset"] = "earliest"
    cfg.setdefault("auto.offset.reset", "latest")
    if args.timeout_ms is not None:  # bounds the metadata waits too
        cfg.setdefault("request.timeout.ms", max(1, args.timeout_ms))
    out = sys.stdout.buffer
    count = 0
    # A count on a terminal's stderr while the records go to a file or a pipe; when they go to
    # the terminal they are their own progress.
    progress = Progress(
        "consumed", args.max_messages, enabled=on_terminal(sys.stderr) and not on_terminal(out)
    )
    with progress, Consumer(cfg) as consumer:
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
        # A closed stdout (BrokenPipeError) ends the command through broker/cli.py main.
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
                out.write(write_record(r))
                count += 1
                if args.max_messages is not None and count >= args.max_messages:
                    break
            out.flush()
            progress.count = count
    print(f"Processed {count} records.", file=sys.stderr)
    return 0


def _check_partition(
    consumer: Consumer, tp: TopicPartition | None, topic: str | None = None
) -> None:
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


def _start_offset(consumer: Consumer, tp: TopicPartition, offset: int, explicit_reset: bool) -> int:
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
