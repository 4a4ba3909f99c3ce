"""`gregor topics create|list|describe|alter|delete|elect-leaders|delete-records`."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors

if TYPE_CHECKING:
    from client import Admin


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("topics", help="create, list, describe, alter and delete topics")
    sub = p.add_subparsers(dest="topics_command", metavar="ACTION", required=True)

    c = sub.add_parser("create", help="create a topic")
    c.add_argument("name", help="the topic to create")
    layout = c.add_mutually_exclusive_group()
    layout.add_argument(
        "--partitions",
        type=int,
        help="number of partitions (default: the cluster's num.partitions)",
    )
    c.add_argument(
        "--replication-factor",
        type=int,
        help="replicas of each partition, placed by the controller (default: the cluster's"
        " default.replication.factor)",
    )
    layout.add_argument(
        "--replica-assignment",
        metavar="B:B:B,B:B:B",
        help="explicit replicas, e.g. 4:5:6,5:6:4: partition i gets the broker ids of the i-th"
        " comma-separated item, the first its preferred leader; replaces --partitions and"
        " --replication-factor",
    )
    c.add_argument(
        "--config",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="topic config, e.g. --config retention.ms=60000 (repeatable)",
    )
    c.add_argument(
        "--if-not-exists", action="store_true", help="succeed if the topic already exists"
    )
    add_bootstrap(c)
    c.set_defaults(func=_create)

    ls = sub.add_parser("list", help="list topic names")
    add_bootstrap(ls)
    ls.set_defaults(func=_list)

    d = sub.add_parser("describe", help="partitions, leaders, replicas, ISR, offsets")
    d.add_argument("name", nargs="?", help="topic (default: all)")
    d.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(d)
    d.set_defaults(func=_describe)

    a = sub.add_parser("alter", help="add partitions to a topic")
    a.add_argument("name", help="the topic to grow")
    a.add_argument(
        "--partitions",
        type=int,
        required=True,
        help="the new total number of partitions (must exceed the current one)",
    )
    add_bootstrap(a)
    a.set_defaults(func=_alter)

    e = sub.add_parser(
        "elect-leaders",
        help="move leadership to the preferred replica (or elect an unclean leader)",
        description="Preferred: each partition's first replica leads again where it is live "
        "and in the ISR. Unclean: an offline partition (no live ISR member) is led by a live "
        "replica, which may lose acknowledged records. Exits 1 if an election failed "
        "(an election that was not needed is not a failure).",
    )
    which = e.add_mutually_exclusive_group(required=True)
    which.add_argument("--topic", help="the partitions of this topic (all, or --partition)")
    which.add_argument(
        "--all-topic-partitions", action="store_true", help="every partition of every topic"
    )
    e.add_argument(
        "--partition", type=int, action="append", default=[], help="with --topic (repeatable)"
    )
    e.add_argument(
        "--election-type",
        choices=("preferred", "unclean"),
        default="preferred",
        help="preferred (default) or unclean, as described above",
    )
    add_bootstrap(e)
    e.set_defaults(func=_elect_leaders)

    dr = sub.add_parser(
        "delete-records",
        help="delete the records below an offset (move the log start offset)",
        description="Move partitions' log start offset (Kafka's kafka-delete-records): the "
        "records below it are gone for every consumer, on every replica. Either TOPIC with "
        "--partition and --offset, or --offset-json-file. Prints each partition's low "
        "watermark (the new log start offset).",
    )
    dr.add_argument("topic", nargs="?", help="the topic (with --partition and --offset)")
    dr.add_argument(
        "--partition",
        type=int,
        action="append",
        default=[],
        help="a partition of TOPIC (repeatable)",
    )
    dr.add_argument(
        "--offset",
        type=int,
        help="delete every record below this offset; -1 means the last stable offset (everything"
        " acknowledged so far, up to the first record of a transaction not yet decided)",
    )
    dr.add_argument(
        "--offset-json-file",
        metavar="FILE",
        help='Kafka\'s format: {"partitions": [{"topic": "t", "partition": 0, "offset": 3}],'
        ' "version": 1}',
    )
    dr.add_argument(
        "--timeout-ms",
        type=int,
        help="how long to wait for every in-sync replica (default: request.timeout.ms)",
    )
    add_bootstrap(dr)
    dr.set_defaults(func=_delete_records)

    rm = sub.add_parser("delete", help="delete a topic")
    rm.add_argument("name", help="the topic to delete")
    rm.add_argument("--if-exists", action="store_true", help="succeed if there is no such topic")
    add_bootstrap(rm)
    rm.set_defaults(func=_delete)


def parse_replica_assignment(text: str) -> list[list[int]]:
    """`4:5:6,5:6:4` -> [[4, 5, 6], [5, 6, 4]] (Kafka's --replica-assignment syntax). Only the
    syntax is checked here; the controller checks the broker ids and the sizes."""
    rows = []
    for i, item in enumerate(text.split(",")):
        try:
            rows.append([int(b) for b in item.split(":")])
        except ValueError:
            raise CommandError(
                f"--replica-assignment {text!r}: partition {i} ({item.strip()!r}) is not"
                " broker ids separated by ':' (e.g. 4:5:6,5:6:4)"
            ) from None
    return rows


def _admin(args: argparse.Namespace) -> Admin:
    from client import Admin

    return Admin(client_config(args))


@reports_errors
def _create(args: argparse.Namespace) -> int:
    from client.errors import TopicAlreadyExistsError

    configs = {}
    for item in args.config:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--config {item!r}: expected KEY=VALUE")
        configs[key] = value
    assignment = None
    if args.replica_assignment is not None:
        if args.replication_factor is not None:
            raise CommandError(
                "--replica-assignment says each partition's replicas: drop --replication-factor"
            )
        assignment = parse_replica_assignment(args.replica_assignment)
    partitions = -1 if args.partitions is None else args.partitions
    rf = -1 if args.replication_factor is None else args.replication_factor
    with _admin(args) as admin:
        try:
            admin.create_topic(
                args.name, partitions, rf, configs or None, replica_assignment=assignment
            )
        except TopicAlreadyExistsError:
            if not args.if_not_exists:
                raise
            print(f"Topic {args.name} already exists.")
            return 0
    print(f"Created topic {args.name}.")
    return 0


@reports_errors
def _list(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        for name in admin.list_topics():
            print(name)
    return 0


@reports_errors
def _describe(args: argparse.Namespace) -> int:
    from client.cli.configs import topic_overrides

    with _admin(args) as admin:
        names = [args.name] if args.name else admin.list_topics()
        descs = [admin.describe_topic(n) for n in names]
        configs = {n: topic_overrides(admin, n) for n in names}
    if args.json:
        print(
            json.dumps(
                [
                    {
                        "name": d.name,
                        "partitions": [p._asdict() for p in d.partitions],
                        "configs": configs[d.name],
                    }
                    for d in descs
                ],
                indent=2,
            )
        )
        return 0
    for d in descs:
        shown = ",".join(f"{k}={v}" for k, v in configs[d.name].items())
        print(
            f"Topic: {d.name}\tPartitionCount: {len(d.partitions)}"
            + (f"\tConfigs: {shown}" if shown else "")
        )
        for p in d.partitions:
            print(
                f"\tPartition: {p.partition}\tLeader: {p.leader}\tLeaderEpoch: {p.leader_epoch}\t"
                f"Replicas: {','.join(map(str, p.replicas))}\tIsr: {','.join(map(str, p.isr))}\t"
                f"LogStartOffset: {p.log_start_offset}\tHighWatermark: {p.high_watermark}"
            )
    return 0


@reports_errors
def _alter(args: argparse.Namespace) -> int:
    with _admin(args) as admin:
        admin.create_partitions(args.name, args.partitions)
    print(f"Topic {args.name} now has {args.partitions} partitions.")
    return 0


@reports_errors
def _elect_leaders(args: argparse.Namespace) -> int:
    from client import TopicPartition
    from client.errors import ElectionNotNeededError

    if args.partition and not args.topic:
        raise SystemExit("--partition needs --topic")
    with _admin(args) as admin:
        wanted = None
        if args.topic:
            numbers = args.partition or [
                p.partition for p in admin.describe_topic(args.topic).partitions
            ]
            wanted = [TopicPartition(args.topic, n) for n in numbers]
        results = admin.elect_leaders(wanted, election_type=args.election_type)
    kind = args.election_type.upper()
    elected = sorted(tp for tp, err in results.items() if err is None)
    not_needed = sorted(
        tp for tp, err in results.items() if isinstance(err, ElectionNotNeededError)
    )
    failed = sorted(
        (tp, err)
        for tp, err in results.items()
        if err is not None and not isinstance(err, ElectionNotNeededError)
    )
    if elected:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in elected)
        print(f"Successfully completed leader election ({kind}) for partitions {names}")
    if not_needed:
        names = ", ".join(f"{tp.topic}-{tp.partition}" for tp in not_needed)
        print(f"Valid replica already elected for partitions {names}")
    if not results:
        print(f"No partition needed a {args.election_type} election.")
    for tp, err in failed:
        print(
            f"Error completing leader election ({kind}) for partition {tp.topic}-{tp.partition}: "
            f"{type(err).__name__}: {err}"
        )
    return 1 if failed else 0


@reports_errors
def _delete(args: argparse.Namespace) -> int:
    from client.errors import UnknownTopicOrPartitionError

    with _admin(args) as admin:
        try:
            admin.delete_topic(args.name)
        except UnknownTopicOrPartitionError:
            if not args.if_exists:
                raise
            return 0
    print(f"Deleted topic {args.name}.")
    return 0


def read_offset_json(path: str) -> dict[tuple[str, int], int]:
    """Kafka's --offset-json-file: {"partitions": [{"topic", "partition", "offset"}, ...]}."""
    try:
        with open(path, encoding="utf-8") as f:
            doc = json.load(f)
    except OSError as exc:
        raise CommandError(f"--offset-json-file {path}: {exc.strerror or exc}") from None
    except json.JSONDecodeError as exc:
        raise CommandError(f"--offset-json-file {path}: not JSON ({exc})") from None
    entries = doc.get("partitions") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise CommandError(
            f'--offset-json-file {path}: expected {{"partitions": [{{"topic": ..., '
            '"partition": ..., "offset": ...}, ...]}'
        )
    out: dict[tuple[str, int], int] = {}
    for i, e in enumerate(entries):
        ok = (
            isinstance(e, dict)
            and isinstance(e.get("topic"), str)
            and all(
                isinstance(e.get(k), int) and not isinstance(e.get(k), bool)
                for k in ("partition", "offset")
            )
        )
        if not ok:
            raise CommandError(
                f"--offset-json-file {path}: partitions[{i}] needs a string topic and integer "
                f"partition and offset, got {e!r}"
            )
        key = (e["topic"], e["partition"])
        if key in out:
            raise CommandError(f"--offset-json-file {path}: {key[0]}-{key[1]} is named twice")
        out[key] = e["offset"]
    return out


@reports_errors
def _delete_records(args: argparse.Namespace) -> int:
    from client import TopicPartition

    if args.offset_json_file is not None:
        if args.topic or args.partition or args.offset is not None:
            raise CommandError("--offset-json-file replaces TOPIC, --partition and --offset")
        wanted = read_offset_json(args.offset_json_file)
    else:
        if not args.topic or not args.partition or args.offset is None:
            raise CommandError("give TOPIC --partition P --offset O (or --offset-json-file FILE)")
        wanted = {(args.topic, p): args.offset for p in args.partition}
    bad = {tp: o for tp, o in wanted.items() if o < -1}
    if bad:
        raise CommandError(f"offsets must be >= -1 (-1 = the last stable offset), got {bad}")
    with _admin(args) as admin:
        low = admin.delete_records(
            {TopicPartition(*tp): o for tp, o in wanted.items()}, timeout_ms=args.timeout_ms
        )
    print("Records delete operation completed:")
    for tp in sorted(low):
        print(f"partition: {tp.topic}-{tp.partition}\tlow_watermark: {low[tp]}")
    return 0
