"""`gregor top`: a live view of the cluster from its nodes' metrics endpoints (docs/metrics.md,
"gregor top"), redrawn every --interval seconds with `rich`:

    gregor top --metrics 127.0.0.1:9404,127.0.0.1:9405       # live, on a terminal; Ctrl-C ends
    gregor top --metrics ... --once --json                    # one sample as JSON, no terminal

A sample needs two scrapes (rates and p99 are over the interval between them), so `--once`
scrapes, waits one interval, scrapes again and prints.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from typing import Any

from client.cli.common import CommandError, on_terminal, reports_errors
from client.cli.top_sample import Scrape, endpoint_url, sample, scrape


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = subparsers.add_parser(
        "top",
        help="live view: brokers, partitions, busiest topics, group lag (from /metrics)",
        description="Reads the metrics endpoints (metrics.listener) of the nodes given and "
        "shows, refreshed every interval: each broker's leader and partition counts, bytes "
        "in/out per second, requests per second and request p99 (FETCH apart: it waits by "
        "design); under-replicated, under-min-ISR and offline partitions; the busiest topics; "
        "the groups with their state, members and lag. Give the controllers' endpoints too to "
        "see the quorum.",
    )
    p.add_argument(
        "--metrics",
        required=True,
        metavar="HOST:PORT[,HOST:PORT...]",
        help="the nodes' metrics endpoints (metrics.listener), comma-separated",
    )
    p.add_argument(
        "--interval", type=float, default=1.0, metavar="S", help="seconds between refreshes (1)"
    )
    p.add_argument(
        "--once", action="store_true", help="print one sample (two scrapes an interval apart)"
    )
    p.add_argument("--json", action="store_true", help="with --once: print the sample as JSON")
    p.add_argument("--topics", type=int, default=10, metavar="N", help="busiest topics shown (10)")
    p.set_defaults(func=_top)


@reports_errors
def _top(args: argparse.Namespace) -> int:
    endpoints = [e for e in args.metrics.split(",") if e.strip()]
    if not endpoints:
        raise CommandError("--metrics: no endpoint given")
    for e in endpoints:
        try:
            endpoint_url(e)
        except ValueError as exc:
            raise CommandError(f"--metrics: {exc}") from None
    if not args.interval > 0:
        raise CommandError(f"--interval must be > 0, got {args.interval}")
    if args.topics < 1:
        raise CommandError(f"--topics must be >= 1, got {args.topics}")
    if args.json and not args.once:
        raise CommandError("--json prints one sample: use it with --once")
    if args.once:
        first = scrape(endpoints)
        time.sleep(args.interval)
        s = sample(first, scrape(endpoints), args.topics)
        if args.json:
            print(json.dumps(s, indent=2, sort_keys=True))
        else:
            from rich.console import Console

            Console().print(render(s))
        return 0 if any(b.get("up") for b in s["brokers"] + s["controllers"]) else 1
    if not on_terminal(sys.stdout):
        raise CommandError("the live view needs a terminal; use --once (and --json) without one")
    return _live(endpoints, args.interval, args.topics)


def _live(endpoints: list[str], interval: float, n_topics: int) -> int:
    from rich.live import Live

    prev: Scrape = scrape(endpoints)
    with Live(render(sample(None, prev, n_topics)), auto_refresh=False, screen=True) as live:
        try:
            while True:
                # every `interval` from the previous scrape (its own time included)
                time.sleep(max(0.0, prev.at + interval - time.monotonic()))
                cur = scrape(endpoints)
                live.update(render(sample(prev, cur, n_topics)), refresh=True)
                prev = cur
        except KeyboardInterrupt:
            return 0


def _num(v: float | None, unit: str = "") -> str:
    if v is None:
        return "-"
    for scale, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= scale:
            return f"{v / scale:.1f}{suffix}{unit}"
    return f"{v:.0f}{unit}" if v == int(v) else f"{v:.1f}{unit}"


def render(s: dict[str, Any]) -> Any:
    """The rich renderable of sample `s`."""
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    parts: list[Any] = []
    p = s["partitions"]
    style = "bold red" if p["offline"] or p["under_min_isr"] else (
        "yellow" if p["under_replicated"] else "green"
    )  # fmt: skip
    parts.append(
        Text(
            f"gregor top  {s['time']}  interval {_num(s['interval_s'], 's')}   partitions: "
            f"{p['under_replicated']} under-replicated, {p['under_min_isr']} under min ISR, "
            f"{p['offline']} offline"
            + ("" if p.get("reassigning") is None else f", {p['reassigning']} reassigning"),
            style=style,
        )
    )
    brokers = Table(title="brokers", title_justify="left", expand=False)
    for col in ("node", "endpoint", "leaders", "partitions", "under-repl", "lag rec", "lag s",
                "in B/s", "out B/s", "req/s", "p99 ms", "fetch p99 ms"):  # fmt: skip
        brokers.add_column(col, justify="left" if col == "endpoint" else "right")
    for b in s["brokers"]:
        if not b["up"]:
            brokers.add_row("?", b["endpoint"], Text(f"down: {b.get('error')}", style="red"))
            continue
        brokers.add_row(
            str(b["node_id"]), b["endpoint"], str(b["leaders"]), str(b["partitions"]),
            Text(str(b["under_replicated"]), style="yellow" if b["under_replicated"] else ""),
            _num(b["follower_lag_records"]), _num(b["follower_lag_s"]),
            _num(b["bytes_in_per_s"]), _num(b["bytes_out_per_s"]), _num(b["requests_per_s"]),
            _num(b["request_p99_ms"]), _num(b["fetch_p99_ms"]),
        )  # fmt: skip
    parts.append(brokers)
    if s["controllers"]:
        ctl = Table(title="controllers", title_justify="left")
        for col in ("endpoint", "active", "leader", "epoch", "reassigning"):
            ctl.add_column(col)
        for c in s["controllers"]:
            ctl.add_row(c["endpoint"], "yes" if c["active"] else "", str(c["leader"]),
                        str(c["epoch"]), str(c["reassigning"]) if c["active"] else "")  # fmt: skip
        parts.append(ctl)
    topics = Table(title="busiest topics", title_justify="left")
    for col in ("topic", "in B/s", "out B/s", "records in/s", "records out/s"):
        topics.add_column(col, justify="left" if col == "topic" else "right")
    for t in s["topics"]:
        topics.add_row(t["topic"], _num(t["bytes_in_per_s"]), _num(t["bytes_out_per_s"]),
                       _num(t["records_in_per_s"]), _num(t["records_out_per_s"]))  # fmt: skip
    parts.append(topics)
    groups = Table(title="groups", title_justify="left")
    for col in ("group", "state", "members", "lag", "lag by topic"):
        groups.add_column(col, justify="right" if col in ("members", "lag") else "left")
    for g in s["groups"]:
        by_topic = ", ".join(f"{t}={n}" for t, n in sorted(g["lag_by_topic"].items()))
        groups.add_row(g["group"], g["state"], str(g["members"]), str(g["lag"]), by_topic)
    parts.append(groups)
    return Group(*parts)
