"""`gregor transactions list|describe|describe-producers|abort`: the transaction
coordinators' state and the partitions' producer state (Kafka's `kafka-transactions.sh`), and
aborting a stuck transaction.

`abort --transactional-id ID` does what a new producer with that id does on start: an
InitProducerId, which bumps the id's epoch (the running producer, if any, is fenced: its next
call fails with ProducerFencedError) and has the coordinator abort the open transaction
(ABORT markers to its partitions). It needs WRITE on the TRANSACTIONAL_ID.

`abort --topic T --partition P --start-offset O` is Kafka's form for a hanging transaction the
coordinator no longer knows: it finds the producer whose open transaction on that partition
starts at O (DescribeProducers) and has the partition's leader write an ABORT marker for it
(WriteTxnMarkers, with the producer's epoch and the coordinator epoch of its last marker, 0
when it has none, as Kafka's tool). It needs CLUSTER_ACTION on the CLUSTER (and READ on the
TOPIC). Only that partition's part of the transaction is aborted."""

from __future__ import annotations

import argparse
import dataclasses
import json
from typing import TYPE_CHECKING

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors

if TYPE_CHECKING:
    from client import Admin

STATES = (
    "Empty",
    "Ongoing",
    "PrepareCommit",
    "PrepareAbort",
    "CompleteCommit",
    "CompleteAbort",
    "PrepareEpochFence",
)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "transactions", help="list and describe transactions, abort a stuck one"
    )
    sub = p.add_subparsers(dest="transactions_command", metavar="ACTION", required=True)

    ls = sub.add_parser("list", help="transactional ids, producer ids, states, coordinators")
    ls.add_argument("--state", action="append", choices=STATES, default=[],
                    help="only these states (repeatable)")  # fmt: skip
    ls.add_argument("--producer-id", action="append", type=int, default=[],
                    help="only this producer id (repeatable)")  # fmt: skip
    ls.add_argument("--duration-ms", type=int, default=-1, metavar="MS",
                    help="only transactions open longer than this (hanging ones)")  # fmt: skip
    ls.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(ls)
    ls.set_defaults(func=_list)

    d = sub.add_parser(
        "describe",
        help="a transactional id's state at its coordinator",
        description="State, producer id and epoch, timeout, when the open transaction began "
        "and its partitions, as the id's coordinator holds them.",
    )
    d.add_argument("--transactional-id", required=True, help="the transactional id")
    d.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(d)
    d.set_defaults(func=_describe)

    dp = sub.add_parser(
        "describe-producers",
        help="a partition's active producers at its leader",
        description="Each producer the partition's leader holds state for: producer id and "
        "epoch, last sequence, last timestamp, coordinator epoch of its last marker, and the "
        "first offset of its open transaction (-1: none). Needs READ on the TOPIC.",
    )
    dp.add_argument("--topic", required=True, help="the topic")
    dp.add_argument("--partition", required=True, type=int, help="the partition")
    dp.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(dp)
    dp.set_defaults(func=_describe_producers)

    a = sub.add_parser(
        "abort",
        help="abort a stuck transaction: by transactional id, or one partition's by offset",
        description="--transactional-id: fences the producer of the id (InitProducerId bumps "
        "its epoch) and has the coordinator abort its open transaction: read_committed "
        "consumers stop waiting on it. The producer, if still running, fails with "
        "ProducerFencedError and must be restarted. Needs WRITE on the TRANSACTIONAL_ID. "
        "--topic/--partition/--start-offset (Kafka's form, for a hanging transaction the "
        "coordinator no longer knows): finds the producer whose open transaction starts at "
        "that offset (describe-producers) and writes an ABORT marker for it to that partition "
        "only. Needs CLUSTER_ACTION on the CLUSTER and READ on the TOPIC.",
    )
    a.add_argument("--transactional-id", help="the transactional id")
    a.add_argument("--topic", help="the partition's topic (with --partition, --start-offset)")
    a.add_argument("--partition", type=int, help="the partition")
    a.add_argument("--start-offset", type=int, metavar="OFFSET",
                   help="the first offset of the hanging transaction on that partition "
                   "(CURRENT-TXN-START-OFFSET in describe-producers)")  # fmt: skip
    add_bootstrap(a)
    a.set_defaults(func=_abort)


def _admin(args: argparse.Namespace) -> Admin:
    from client import Admin

    return Admin(client_config(args))


@reports_errors
def _list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        found = admin.list_transactions(
            states=args.state, producer_ids=args.producer_id, duration_ms=args.duration_ms
        )
    if args.json:
        print(json.dumps([dataclasses.asdict(t) for t in found], indent=2))
        return 0
    rows = [("TRANSACTIONAL-ID", "PRODUCER-ID", "STATE", "COORDINATOR")]
    rows += [(t.transactional_id, str(t.producer_id), t.state, str(t.coordinator)) for t in found]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


@reports_errors
def _describe(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        d = admin.describe_transactions([args.transactional_id])[args.transactional_id]
    if args.json:
        print(json.dumps(dataclasses.asdict(d), indent=2))
        return 0
    from datetime import UTC, datetime

    started = (
        "-"
        if d.start_time_ms is None
        else datetime.fromtimestamp(d.start_time_ms / 1000, UTC).isoformat(timespec="milliseconds")
    )
    print(f"Transactional id {d.transactional_id}: state {d.state}, coordinator {d.coordinator}")
    print(f"  producer id {d.producer_id} epoch {d.producer_epoch}, timeout {d.timeout_ms} ms")
    print(f"  started {started}")
    parts = ", ".join(f"{tp.topic}-{tp.partition}" for tp in d.partitions) or "-"
    print(f"  partitions {parts}")
    return 0


@reports_errors
def _describe_producers(args: argparse.Namespace) -> int:
    from client import TopicPartition

    tp = TopicPartition(args.topic, args.partition)
    with _admin(args) as admin:
        found = admin.describe_producers([tp])[tp]
    if args.json:
        print(json.dumps([dataclasses.asdict(s) for s in found], indent=2))
        return 0
    head = ("PRODUCER-ID", "EPOCH", "LAST-SEQUENCE", "LAST-TIMESTAMP", "COORDINATOR-EPOCH",
            "CURRENT-TXN-START-OFFSET")  # fmt: skip
    rows = [head]
    rows += [
        (str(s.producer_id), str(s.producer_epoch), str(s.last_sequence), _time(s.last_timestamp),
         str(s.coordinator_epoch), str(s.current_txn_start_offset))
        for s in found
    ]  # fmt: skip
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def _time(ms: int) -> str:
    from datetime import UTC, datetime

    if ms < 0:
        return "-"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")


@reports_errors
def _abort(args: argparse.Namespace) -> int:
    by_offset = (args.topic, args.partition, args.start_offset)
    if args.transactional_id is not None:
        if any(v is not None for v in by_offset):
            raise CommandError(
                "give either --transactional-id or --topic/--partition/--start-offset, not both"
            )
        return _abort_id(args)
    if any(v is None for v in by_offset):
        raise CommandError(
            "give --transactional-id, or all of --topic, --partition and --start-offset"
        )
    return _abort_at_offset(args)


def _abort_at_offset(args: argparse.Namespace) -> int:
    from client import TopicPartition

    tp = TopicPartition(args.topic, args.partition)
    with _admin(args) as admin:
        producers = admin.describe_producers([tp])[tp]
        match = [s for s in producers if s.current_txn_start_offset == args.start_offset]
        if not match:
            open_at = sorted(
                s.current_txn_start_offset for s in producers if s.current_txn_start_offset >= 0
            )
            raise CommandError(
                f"no producer has a transaction open at offset {args.start_offset} on "
                f"{tp.topic}-{tp.partition} (open transactions start at: "
                f"{', '.join(map(str, open_at)) or 'none'})"
            )
        s = match[0]
        coordinator_epoch = max(s.coordinator_epoch, 0)  # (Kafka's tool: 0 when none)
        admin.abort_transaction(tp, s.producer_id, s.producer_epoch, coordinator_epoch)
    print(
        f"Aborted the transaction of producer {s.producer_id} epoch {s.producer_epoch} on "
        f"{tp.topic}-{tp.partition} (open since offset {args.start_offset})."
    )
    return 0


def _abort_id(args: argparse.Namespace) -> int:
    from client import Admin, Producer
    from client.errors import TransactionalIdNotFoundError

    tid = args.transactional_id
    with Admin(client_config(args)) as admin:
        try:
            before = admin.describe_transactions([tid])[tid]
        except TransactionalIdNotFoundError:
            raise CommandError(
                f"transactional id {tid!r} is not known to its coordinator"
            ) from None
        cfg = client_config(args)
        cfg["transactional.id"] = tid
        cfg["transaction.timeout.ms"] = before.timeout_ms  # (kept: the record stores it)
        with Producer(cfg) as p:
            p.init_transactions()  # fences the id's producer; its open transaction is aborted
        after = admin.describe_transactions([tid])[tid]
    if before.state == "Ongoing":
        what = f"aborted its open transaction over {len(before.partitions)} partition(s)"
    else:
        what = f"no transaction was open (state {before.state})"
    print(
        f"Transactional id {tid}: producer id {before.producer_id} epoch {before.producer_epoch}"
        f" fenced (now epoch {after.producer_epoch}); {what}."
    )
    return 0
