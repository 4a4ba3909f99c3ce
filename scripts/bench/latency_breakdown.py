#!/usr/bin/env python
"""Where a produce round trip spends its time, stage by stage; prints one JSON object.

One acks=all producer (client.aio, linger.ms=0) sends one 100-byte record and awaits it,
--records times in a row, against a real `gregor server` subprocess (log.flush.on.ack=true,
then false). Both processes carry a tracer that stamps time.perf_counter_ns() when named
functions run; the stamps are grouped per request and each stage reported as p50/p90/p99 us:

  broker: frame read -> request queued -> I/O thread took it -> body schema-checked ->
          append started -> append done -> flush requested -> handler returned ->
          flusher started -> fsynced -> response ready -> response written -> connection unmuted
  client: answer read -> request resumed -> futures completing -> futures done ->
          next send() -> sender woken -> sender drained -> request dispatched ->
          batch built -> request encoded

plus the whole round trip, a bare write+fdatasync on the same disk, and the floor of the
hand-offs themselves (two Python threads passing a token; two processes over a socketpair). The tracer wraps
functions by name (a profiling tool, not a test): a rename in the broker or the client makes
it exit with the missing name. Tracing adds ~1-2 us per stamp, so stage sums exceed the
untraced round trip of produce_bench.py a little.

    .venv/bin/python scripts/bench/latency_breakdown.py [--records 3000]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import sys
import tempfile
import textwrap
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from _server import start_server, stop_server  # noqa: E402
from _stats import percentile  # noqa: E402
from produce_bench import fsync_latency  # noqa: E402

# (stage name, module, class or "" for a module function, function, stamp after the call?)
BROKER_POINTS = [
    ("frame_read", "broker.network.connection", "Connection", "buffer_updated", False),
    ("queued", "broker.request_channel", "RequestChannel", "try_send", False),
    ("io_took", "broker.request_channel", "RequestChannel", "receive", True),
    ("checked", "client.protocol.schema", "ApiSpec", "check_request", True),
    ("append_start", "broker.log.log", "Log", "append_as_leader", False),
    ("append_done", "broker.log.log", "Log", "append_as_leader", True),
    ("flush_requested", "broker.log.flusher", "Flusher", "request_flush", True),
    ("handler_returned", "broker.replica.manager", "ReplicaManager", "append_records", True),
    ("flush_start", "broker.log.flusher", "Flusher", "_flush_one", False),
    ("fsynced", "broker.log.log", "Log", "flush", True),
    ("response_ready", "broker.network.connection", "Connection", "complete_threadsafe", False),
    ("written", "broker.network.connection", "Connection", "complete_threadsafe", True),
    ("unmuted", "broker.network.connection", "Connection", "_complete", True),
]
CLIENT_POINTS = [
    ("answer_read", "client.aio.connection", "BrokerConnection", "_on_data", False),
    ("resumed", "client.aio.connection", "BrokerConnection", "_check", False),
    ("completing", "client.aio.sender", "Sender", "_finish", False),
    ("completed", "client.aio.sender", "Sender", "_finish", True),
    ("next_send", "client.aio.producer", "Producer", "_try_append", False),
    ("sender_woken", "client.aio.producer", "Producer", "_wake", True),
    ("drained", "client.aio.accumulator", "RecordAccumulator", "drain", False),
    ("dispatched", "client.aio.sender", "Sender", "_dispatch", True),
    ("batch_built", "client.aio.sender", "", "build_batch", True),
    ("encoded", "client.aio.connection", "", "encode_request", True),
]

# The tracer: installed in this process directly, and in the broker through a sitecustomize
# on its PYTHONPATH (the broker imports its modules after start-up, so it installs on the
# first import of broker.server and writes the stamps at exit).
TRACER = textwrap.dedent(
    """
    import atexit, functools, importlib, json, os, sys, time

    STAMPS = []

    def install(points):
        clock = time.perf_counter_ns
        for name, module, cls, func, after in points:
            owner = importlib.import_module(module)
            if cls:
                owner = getattr(owner, cls)
            fn = getattr(owner, func)

            def wrapped(*a, _fn=fn, _name=name, _after=after, **k):
                if not _after:
                    STAMPS.append((_name, clock()))
                r = _fn(*a, **k)
                if _after:
                    STAMPS.append((_name, clock()))
                return r

            functools.update_wrapper(wrapped, fn)
            setattr(owner, func, wrapped)
    """
)
SITECUSTOMIZE = TRACER + textwrap.dedent(
    """
    _points = os.environ.get("LATENCY_TRACE_POINTS")
    _out = os.environ.get("LATENCY_TRACE_OUT")
    if _points and _out:
        import builtins
        _import = builtins.__import__

        def _hook(name, *a, **k):
            mod = _import(name, *a, **k)
            if name == "broker.server" and builtins.__import__ is _hook:
                builtins.__import__ = _import
                install(json.loads(_points))
            return mod

        builtins.__import__ = _hook
        atexit.register(lambda: open(_out, "w").write(json.dumps(STAMPS)))
    """
)


def stages(stamps: list, points: list, first: str, skip: int) -> dict:
    """Per-request stage durations (us) from the stamps: a request starts at `first`; the
    first `skip` requests (warm-up) are dropped; only requests with every stamp count."""
    names = [p[0] for p in points]
    reqs: list[dict] = []
    for name, ns in stamps:
        if name == first:
            reqs.append({})
        if reqs and name not in reqs[-1]:
            reqs[-1][name] = ns
    whole = [r for r in reqs if all(n in r for n in names)][skip:]
    out: dict = {"requests": len(whole)}
    for a, b in itertools.pairwise(names):
        out[f"{a} -> {b}"] = _pct([(r[b] - r[a]) / 1000 for r in whole])
    out[f"{names[0]} -> {names[-1]}"] = _pct([(r[names[-1]] - r[names[0]]) / 1000 for r in whole])
    return out


def _pct(xs: list[float]) -> dict:
    if not xs:
        return {}
    xs = sorted(xs)
    return {f"p{q}_us": round(percentile(xs, q / 100), 1) for q in (50, 90, 99)}


def handoff_floor(n: int = 3000) -> dict:
    """The cost of the hand-offs alone (us per round trip, two wake-ups each): two Python
    threads passing a token through semaphores, and two processes through a socketpair."""
    import socket
    import threading

    gap = 0.0002  # the caller pauses between trips, as the producer waits for the broker
    ping, pong = threading.Semaphore(0), threading.Semaphore(0)

    def peer() -> None:
        for _ in range(n):
            ping.acquire()
            pong.release()

    t = threading.Thread(target=peer)
    t.start()
    threads = []
    for _ in range(n):
        t0 = time.perf_counter()
        ping.release()
        pong.acquire()
        threads.append((time.perf_counter() - t0) * 1e6)
        time.sleep(gap)
    t.join()
    a, b = socket.socketpair()
    pid = os.fork()
    if pid == 0:  # the child echoes n messages, then leaves without cleanup handlers
        for _ in range(n):
            b.send(b.recv(64))
        os._exit(0)
    procs = []
    for _ in range(n):
        t0 = time.perf_counter()
        a.send(b"x" * 50)
        a.recv(64)
        procs.append((time.perf_counter() - t0) * 1e6)
        time.sleep(gap)
    os.waitpid(pid, 0)
    a.close()
    b.close()
    return {"thread_round_trip": _pct(threads), "process_round_trip": _pct(procs)}


def run_once(records: int, flush_on_ack: bool, tmp: str) -> dict:
    import uvloop

    from client import Admin
    from client.aio import Producer

    ns: dict = {}
    exec(TRACER, ns)  # noqa: S102 - our own tracer source, shared with the broker side
    trace_dir = str(Path(tmp) / "trace")
    Path(trace_dir).mkdir(parents=True, exist_ok=True)
    Path(trace_dir, "sitecustomize.py").write_text(SITECUSTOMIZE)
    broker_out = str(Path(tmp) / "broker-stamps.json")
    env_before = dict(os.environ)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        filter(None, [trace_dir, os.environ.get("PYTHONPATH")])
    )
    os.environ["LATENCY_TRACE_POINTS"] = json.dumps(BROKER_POINTS)
    os.environ["LATENCY_TRACE_OUT"] = broker_out
    data = str(Path(tmp) / "data")
    try:
        server = start_server(data, overrides={"log.flush.on.ack": str(flush_on_ack).lower()})
    finally:
        os.environ.clear()
        os.environ.update(env_before)
    rtt: list[float] = []
    try:
        with Admin({"bootstrap.servers": server.bootstrap}) as admin:
            admin.create_topic("latency", partitions=1)

        async def run() -> None:
            ns["install"](CLIENT_POINTS)  # before the producer binds any of the methods
            async with Producer(bootstrap_servers=server.bootstrap, acks="all", linger_ms=0) as p:
                for _ in range(records):
                    t0 = time.perf_counter()
                    await p.send_and_wait("latency", b"x" * 100)
                    rtt.append((time.perf_counter() - t0) * 1e6)

        uvloop.run(run())
    finally:
        stop_server(server.proc)
    broker_stamps = json.loads(Path(broker_out).read_text())
    skip = min(100, records // 10)
    broker = stages(broker_stamps, BROKER_POINTS, "frame_read", skip)
    if not flush_on_ack:  # the I/O thread answers before the handler returns; no flusher
        names = {"flush_requested", "handler_returned", "flush_start", "fsynced"}
        pts = [p for p in BROKER_POINTS if p[0] not in names]
        broker = stages([s for s in broker_stamps if s[0] not in names], pts, "frame_read", skip)
    return {
        "log.flush.on.ack": flush_on_ack,
        "round_trip": _pct(rtt),
        "broker": broker,
        "client": stages(ns["STAMPS"], CLIENT_POINTS, "answer_read", skip),
        "bare_fdatasync": fsync_latency(tmp, 2000),
        "bare_fdatasync_paced_1ms": fsync_latency(tmp, 1000, gap_s=0.001),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=3000)
    args = ap.parse_args()
    out: dict = {"load_before": [round(x, 2) for x in os.getloadavg()], "runs": []}
    for flush_on_ack in (True, False):
        tmp = tempfile.mkdtemp(prefix="gregor-latency-")
        try:
            out["runs"].append(run_once(args.records, flush_on_ack, tmp))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    out["handoff_floor"] = handoff_floor()
    out["load_after"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
