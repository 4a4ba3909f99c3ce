"""`gregor quotas set|describe`: client quotas (docs/security.md, "Quotas"), Kafka's
`kafka-configs --entity-type users/clients` for quotas.

    gregor quotas set --user alice --producer-byte-rate 1048576 --request-percentage 50
    gregor quotas set --user-default --client-id etl --consumer-byte-rate 2097152
    gregor quotas set --user alice --delete producer_byte_rate
    gregor quotas describe [--user alice | --user-default] [--client-id X | --client-id-default]
                           [--json]

An entity is a user, a client id, or both; the `-default` flags name the default entity of
that type (Kafka's `<default>`). `describe` without flags lists every quota. Connection
settings, security included, come from --command-config FILE and -X.
"""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from client.cli.common import CommandError, add_bootstrap, client_config, reports_errors
from client.quotas import (
    CLIENT_ID,
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    QUOTA_KEYS,
    REQUEST_PERCENTAGE,
    USER,
)

if TYPE_CHECKING:
    from client import Admin


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser("quotas", help="set and describe client quotas (users, client ids)")
    sub = p.add_subparsers(dest="quotas_command", metavar="ACTION", required=True)

    s = sub.add_parser("set", help="set or delete quotas of a user, a client id, or both")
    _add_entity(s)
    s.add_argument("--producer-byte-rate", type=int, metavar="BYTES",
                   help="bytes per second this entity's producers may send (producer_byte_rate)")  # fmt: skip
    s.add_argument("--consumer-byte-rate", type=int, metavar="BYTES",
                   help="bytes per second this entity's consumers may fetch (consumer_byte_rate)")  # fmt: skip
    s.add_argument("--request-percentage", type=float, metavar="PERCENT",
                   help="percent of one broker thread's time this entity's requests may take"
                   " (request_percentage; 200 = two threads)")  # fmt: skip
    s.add_argument("--delete", action="append", default=[], choices=QUOTA_KEYS, metavar="KEY",
                   help=f"remove quota KEY ({', '.join(QUOTA_KEYS)}); repeatable")  # fmt: skip
    add_bootstrap(s)
    s.set_defaults(func=_set)

    d = sub.add_parser("describe", help="quotas of the entities matching the flags (none: all)")
    _add_entity(d)
    d.add_argument("--json", action="store_true", help="print JSON")
    add_bootstrap(d)
    d.set_defaults(func=_describe)


def _add_entity(p: argparse.ArgumentParser) -> None:
    u = p.add_mutually_exclusive_group()
    u.add_argument("--user", metavar="NAME", help="the user (principal name, e.g. alice)")
    u.add_argument("--user-default", action="store_true", help="the default user")
    c = p.add_mutually_exclusive_group()
    c.add_argument("--client-id", metavar="ID", help="the client id")
    c.add_argument("--client-id-default", action="store_true", help="the default client id")


def _entity(args: argparse.Namespace) -> dict[str, str | None]:
    out: dict[str, str | None] = {}
    if args.user is not None or args.user_default:
        out[USER] = None if args.user_default else args.user
    if args.client_id is not None or args.client_id_default:
        out[CLIENT_ID] = None if args.client_id_default else args.client_id
    for t, name in out.items():
        if name == "":
            raise CommandError(f"empty {t} name (use --{t}-default for the default {t})")
    return out


def _admin(args: argparse.Namespace) -> Admin:
    from client import Admin

    return Admin(client_config(args))


@reports_errors
def _set(args: argparse.Namespace) -> int:
    from client.aio.admin_quotas import ClientQuotaAlteration, ClientQuotaEntity, Op

    parts = _entity(args)
    if not parts:
        raise CommandError("name the entity: --user/--user-default and/or --client-id/...")
    values = {
        PRODUCER_BYTE_RATE: args.producer_byte_rate,
        CONSUMER_BYTE_RATE: args.consumer_byte_rate,
        REQUEST_PERCENTAGE: args.request_percentage,
    }
    ops = [Op(k, float(v)) for k, v in values.items() if v is not None]
    for key in args.delete:
        if values[key] is not None:
            raise CommandError(f"{key} is both set and deleted")
        ops.append(Op(key, None))
    if not ops:
        raise CommandError("nothing to do: give --producer-byte-rate, ... or --delete KEY")
    entity = ClientQuotaEntity.of(parts)
    with _admin(args) as admin:
        err = admin.alter_client_quotas([ClientQuotaAlteration(entity, ops)]).get(entity)
    if err is not None:
        raise err
    print(f"quotas of {entity}: " + ", ".join(_op_text(op.key, op.value) for op in ops))
    return 0


def _op_text(key: str, value: float | None) -> str:
    return f"{key} deleted" if value is None else f"{key}={_num(value)}"


def _num(v: float) -> str:
    return str(int(v)) if v == int(v) else str(v)


@reports_errors
def _describe(args: argparse.Namespace) -> int:
    from client.aio.admin_quotas import ClientQuotaFilterComponent as F

    components = []
    for t, name in _entity(args).items():
        components.append(F.of_default_entity(t) if name is None else F.of_entity(t, name))
    with _admin(args) as admin:
        found = admin.describe_client_quotas(components)
    rows = sorted(found.items(), key=lambda kv: str(kv[0]))
    if args.json:
        print(json.dumps([{"entity": e.as_dict(), "quotas": q} for e, q in rows], indent=2))
        return 0
    for entity, quotas in rows:
        print(f"{entity}\t" + ", ".join(f"{k}={_num(v)}" for k, v in sorted(quotas.items())))
    return 0
