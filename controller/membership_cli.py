"""`gregor quorum add-controller` / `remove-controller`: change the controller quorum's voters.

    gregor quorum add-controller --bootstrap-controller HOST:PORT --config controller-4.yaml
    gregor quorum add-controller --bootstrap-controller HOST:PORT --controller-id 4 --endpoint HOST:PORT
    gregor quorum remove-controller --bootstrap-controller HOST:PORT --controller-id 3

The new controller must be running first (started with its node.id outside
`controller.quorum.voters` and `controller.quorum.listener` set): it joins as a learner, catches
up, and only then becomes a voter. Each command sends AddRaftVoter / RemoveRaftVoter to the
active controller (following NOT_CONTROLLER to the leader), in attempts of at most 5 s that each
report on stderr what the change is waiting for, until it is committed or `--timeout-ms` passes
(exit 1; running the command again continues the change). Exit 0 prints the new voter set.
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from client.protocol.body import Body

ATTEMPT_MS = 5000


def register(qsub: Any) -> None:
    a = qsub.add_parser(
        "add-controller",
        help="add a running controller to the voters (learner, catch-up, then voter)",
    )
    _common(a)
    a.add_argument("--config", metavar="FILE", help="the new controller's YAML config file")
    a.add_argument("--controller-id", type=int, help="its node.id (instead of --config)")
    a.add_argument("--endpoint", metavar="HOST:PORT", help="its address (instead of --config)")
    a.set_defaults(func=run_add)
    r = qsub.add_parser(
        "remove-controller", help="remove a controller from the voters (it may be down)"
    )
    _common(r)
    r.add_argument("--controller-id", type=int, required=True, help="its node.id")
    r.set_defaults(func=run_remove)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--bootstrap-controller",
        required=True,
        metavar="HOST:PORT",
        help="any controller of the quorum (the request goes on to its leader)",
    )
    p.add_argument(
        "--timeout-ms", type=int, default=120_000, help="give up after this long (default 120 s)"
    )


def run_add(args: argparse.Namespace) -> int:
    if args.config:
        from controller.cli import _load_config
        from controller.quorum.membership_service import own_address
        from controller.quorum.network import parse_voters

        try:
            cfg = _load_config(args.config, {})
            node_id = int(cfg.node_id)
            host, port = own_address(
                node_id,
                parse_voters(cfg.controller_quorum_voters),
                getattr(cfg, "controller_quorum_listener", None),
            )
        except (OSError, ValueError) as e:
            print(f"gregor quorum add-controller: {args.config}: {e}", file=sys.stderr)
            return 2
        endpoint = f"{host}:{port}"
    elif args.controller_id is not None and args.endpoint:
        node_id, endpoint = args.controller_id, args.endpoint
    else:
        print(
            "gregor quorum add-controller: give --config FILE, or --controller-id and --endpoint",
            file=sys.stderr,
        )
        return 2
    from client.protocol.api_keys import ApiKey

    body = {"voter_id": node_id, "endpoint": endpoint}
    return _run("add-controller", ApiKey.ADD_RAFT_VOTER, body, args)


def run_remove(args: argparse.Namespace) -> int:
    from client.protocol.api_keys import ApiKey

    body = {"voter_id": args.controller_id}
    return _run("remove-controller", ApiKey.REMOVE_RAFT_VOTER, body, args)


def _run(cmd: str, api_key: int, body: Body, args: argparse.Namespace) -> int:
    from client.errors import ErrorCode
    from controller.cli import describe_quorum
    from controller.quorum.network import request

    deadline = time.monotonic() + max(args.timeout_ms, 0) / 1000.0
    target = args.bootstrap_controller
    last = "no answer"
    while True:
        left_ms = int((deadline - time.monotonic()) * 1000)
        if left_ms <= 0:
            print(f"gregor quorum {cmd}: timed out: {last}", file=sys.stderr)
            return 1
        attempt = min(ATTEMPT_MS, left_ms)
        host, port = target.rsplit(":", 1)
        try:
            resp = request(
                host,
                int(port),
                api_key,
                {**body, "timeout_ms": attempt},
                timeout=attempt / 1000.0 + 5.0,
            )
        except (OSError, ValueError) as e:
            last = f"{target}: {e}"
            target = _leader_of(args.bootstrap_controller) or args.bootstrap_controller
            time.sleep(0.2)
            continue
        code = resp.get("error_code", -1)
        if code == 0:
            return _print_voters(describe_quorum(args.bootstrap_controller), cmd)
        last = resp.get("error_message") or f"error {code}"
        if code == ErrorCode.NOT_CONTROLLER:
            target = resp.get("leader_endpoint") or _leader_of(args.bootstrap_controller) or target
            time.sleep(0.1)
        elif code == ErrorCode.REQUEST_TIMED_OUT:
            print(f"gregor quorum {cmd}: {last}", file=sys.stderr, flush=True)
        else:
            print(f"gregor quorum {cmd}: {last} (error {code})", file=sys.stderr)
            return 1


def _leader_of(bootstrap: str) -> str | None:
    from controller.cli import describe_quorum

    try:
        ep = describe_quorum(bootstrap).get("leader_endpoint")
    except OSError:
        return None
    return str(ep) if ep else None


def _print_voters(resp: dict[str, Any], cmd: str) -> int:
    voters = sorted(r["replica_id"] for r in resp.get("voters", []))
    print(f"gregor quorum {cmd}: done; voters {voters} (leader {resp.get('leader_id')})")
    return 0
