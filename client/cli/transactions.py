"""`gregor transactions list|describe|abort`: the transaction coordinators' state (Kafka's
`kafka-transactions.sh`), and aborting the open transaction of a transactional id.

`abort --transactional-id ID` does what a new producer with that id does on start: an
InitProducerId, which bumps the id's epoch (the running producer, if any, is fenced: its next
call fails with ProducerFencedError) and has the coordinator abort the open transaction
(ABORT markers to its partitions). It needs WRITE on the TRANSACTIONAL_ID. Kafka's `abort`
instead writes a marker to one partition by hand (--topic/--partition/--start-offset) for a
transaction the coordinator no longer knows; that form is not built (Gregor's coordinator
keeps every id it has seen)."""

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

    a = sub.add_parser(
        "abort",
        help="abort a transactional id's open transaction (fences its producer)",
        description="Fences the producer of the id (InitProducerId bumps its epoch) and has "
        "the coordinator abort its open transaction: read_committed consumers stop waiting "
        "on it. The producer, if still running, fails with ProducerFencedError and must be "
        "restarted. Needs WRITE on the TRANSACTIONAL_ID.",
    )
    a.add_argument("--transactional-id", required=True, help="the transactional id")
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
def _abort(args: argparse.Namespace) -> int:
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
