"""`gregor produce TOPIC`: one record per stdin line, as kcat -P does.

    -K/--key-separator SEP   split each line at the first SEP into key and value
    -H/--header NAME=VALUE   a header on every record (repeatable)
    -p/--partition N         every record to partition N (else the key's hash, or sticky)
    -J/--json                each line a JSON object: value (or payload), key, headers,
                             partition, timestamp (or ts); what `consume --json` prints is
                             accepted, so its output can be piped back in

A line that cannot be used stops the command with `error: line N: ...` (exit 1); the records
before it were sent.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from client.cli.common import (
    ACKS_HELP,
    CommandError,
    Progress,
    add_bootstrap,
    client_config,
    on_terminal,
    reports_errors,
)
from client.cli.formats import FormatError, from_json

MAX_UNCONFIRMED = 10_000  # futures kept before waiting for them (bounds memory on big inputs)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "produce",
        help="send stdin lines as records",
        description="Send each line of stdin as one record (kcat -P); Ctrl-D ends the input.",
    )
    p.add_argument("topic", help="the topic to write to")
    shape = p.add_mutually_exclusive_group()
    shape.add_argument(
        "-K",
        "--key-separator",
        metavar="SEP",
        help="split each line at the first SEP into key and value (a line without SEP is a"
        " value with no key)",
    )
    shape.add_argument(
        "-J",
        "--json",
        action="store_true",
        help="each line is a JSON object: value (or payload), key, headers ({name: value} or"
        " kcat's [name, value, ...]), partition, timestamp (or ts); consume --json output"
        " is accepted",
    )
    p.add_argument(
        "-H",
        "--header",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="add this header to every record (repeatable)",
    )
    p.add_argument("-p", "--partition", type=int, help="send every record to this partition")
    p.add_argument("--acks", choices=["all", "-1", "0", "1"], default="all", help=ACKS_HELP)
    p.add_argument(
        "--compression",
        choices=["none", "gzip", "lz4", "zstd"],
        default=None,
        help="compression.type of the batches (default: the producer's, none)",
    )
    add_bootstrap(p)
    p.set_defaults(func=_produce)


def _parse_headers(items: list[str]) -> list[tuple[str, bytes]]:
    out = []
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise CommandError(f"--header {item!r}: expected NAME=VALUE")
        out.append((name, value.encode()))
    return out


def _records(args: argparse.Namespace, headers: list[tuple[str, bytes]]) -> Any:
    """(line number, send keyword arguments) per stdin line."""
    sep = args.key_separator.encode() if args.key_separator else None
    for n, raw in enumerate(sys.stdin.buffer, 1):
        line = raw.rstrip(b"\r\n")
        if args.json:
            if not line.strip():
                continue  # blank lines between objects are allowed
            try:
                rec = from_json(line.decode("utf-8", "surrogateescape"))
            except FormatError as exc:
                raise CommandError(f"line {n}: {exc}") from None
            if args.partition is not None and rec["partition"] is None:
                rec["partition"] = args.partition
            rec["headers"] = rec["headers"] + headers
            yield n, rec
            continue
        key = None
        value = line
        if sep is not None:
            k, found, v = line.partition(sep)
            if found:
                key, value = k, v
        yield n, {"value": value, "key": key, "headers": headers, "partition": args.partition}


@reports_errors
def _produce(args: argparse.Namespace) -> int:
    from client import Producer

    headers = _parse_headers(args.header)
    cfg = client_config(args, acks=args.acks, **{"compression.type": args.compression})
    count = 0
    # A count on a terminal's stderr while stdin is a file or a pipe (not while typing).
    progress = Progress("sent", enabled=on_terminal(sys.stderr) and not on_terminal(sys.stdin))
    with progress, Producer(cfg) as producer:
        futures = []
        known: list[int] = []  # the topic's partitions, read at the first explicit partition
        for n, rec in _records(args, headers):
            p = rec["partition"]
            if p is not None and p not in known:
                known = producer.partitions_for(args.topic)
                if p not in known:  # else the send would wait max.block.ms for it
                    where = "--partition" if args.partition == p else f"line {n}: partition"
                    raise CommandError(
                        f"{where} {p}: topic {args.topic!r} has {len(known)} partition(s)"
                        + (f", 0..{len(known) - 1}" if known else "")
                    )
            futures.append(
                producer.send(
                    args.topic,
                    rec["value"],
                    key=rec["key"],
                    partition=rec["partition"],
                    headers=rec["headers"] or None,
                    timestamp_ms=rec.get("timestamp_ms"),
                )
            )
            count += 1
            progress.count = count
            if len(futures) >= MAX_UNCONFIRMED:
                for f in futures:
                    f.result()
                futures.clear()
        producer.flush()
        for f in futures:
            f.result()
    print(f"Produced {count} records to {args.topic}.", file=sys.stderr)
    return 0
