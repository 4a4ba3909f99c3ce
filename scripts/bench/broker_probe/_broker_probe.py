"""An in-situ probe for the broker processes of a benchmark's cluster (a tool for finding where
a broker's time goes under a real load, not product code; it changes nothing it is not asked
to wrap).

Put scripts/bench/broker_probe on the PYTHONPATH of the processes a benchmark starts (the
cluster's nodes inherit the benchmark's environment) and set:

    BROKER_PROBE_OUT=DIR        where each probed process writes DIR/<pid>.json (every second
                                and at exit); the probe is off without it
    BROKER_PROBE_FUNCS=m:Q.f,...  functions to wrap: module, then the qualified name of a
                                function or method (e.g. broker.log.log:Log.append_as_leader).
                                Per function: calls, thread CPU and wall time; each call whose
                                wall time is over BROKER_PROBE_SLOW_MS (default 5) is kept with
                                its start, nesting depth, CPU and thread
    BROKER_PROBE_STAGES=1       every answered request's stages, as the metrics' StageRecorder
                                measures them (broker/request_metrics.py): queue, local,
                                remote, response queue, send and total, with the client id
    BROKER_PROBE_ROLES=a,b      which processes: those whose command line has one of these
                                words (default "broker,server": brokers and `gregor server`,
                                not controllers)
    BROKER_PROBE_RESET=FILE     start counting again when FILE is touched (checked once a
                                second): what the calls, stages and CPU then sum is what came
                                after, not the cluster's start and a benchmark's setup (a log's
                                first writes, for one, stage its leader epochs in the flush
                                path). roundrobin_bench.py touches it before its passes

Modules are patched as they are imported (an import hook), so a function is wrapped before any
object of the broker calls it. `scripts/bench/broker_probe_report.py DIR` sums the files up.

    PYTHONPATH=scripts/bench/broker_probe BROKER_PROBE_OUT=/tmp/probe \\
        BROKER_PROBE_FUNCS=broker.replica.manager:ReplicaManager.append_records \\
        .venv/bin/python scripts/bench/e2e_latency_bench.py
"""

from __future__ import annotations

import atexit
import importlib.abc
import importlib.machinery
import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Any

STATS: dict[str, list[int]] = {}  # label -> [calls, thread cpu ns, wall ns]
SLOW: list[tuple[int, str, int, int, int, str]] = []  # start ns, label, depth, wall, cpu, thread
STAGES: list[tuple[Any, ...]] = []
_SINCE = {"cpu_s": 0.0, "resets": 0}  # the process CPU at the last reset, and how many
_MAX_KEPT = 300_000
_local = threading.local()


def _wrap(owner: Any, name: str, label: str, slow_ns: int) -> None:
    fn = getattr(owner, name)
    cpu = time.thread_time_ns
    mono = time.monotonic_ns

    def probed(*args: Any, **kwargs: Any) -> Any:
        c0, m0 = cpu(), mono()
        depth = getattr(_local, "depth", 0)
        _local.depth = depth + 1
        try:
            return fn(*args, **kwargs)
        finally:
            _local.depth = depth
            c, wall = cpu() - c0, mono() - m0
            s = STATS.get(label)
            if s is None:
                s = STATS[label] = [0, 0, 0]
            s[0] += 1
            s[1] += c
            s[2] += wall
            if wall > slow_ns and len(SLOW) < _MAX_KEPT:
                SLOW.append((m0, label, depth, wall, c, threading.current_thread().name))

    probed.__wrapped__ = fn  # type: ignore[attr-defined]
    setattr(owner, name, probed)


def _stages(module: Any) -> None:
    """broker.network.processor: every Processor made records each answered request's stages
    (broker.request_metrics.request_stages, what the metrics' StageRecorder measures) into
    STAGES."""
    from broker.request_metrics import request_stages

    class Recorder:  # (the network threads call a recorder's `sent` as the StageRecorder's)
        def sent(self, request: Any, picked_ns: int, end_ns: int) -> None:
            if len(STAGES) < _MAX_KEPT:
                stages = request_stages(request, picked_ns, end_ns)
                STAGES.append((request.api_key, request.received_ns, *stages, request.client_id))

    init = module.Processor.__init__

    def probed_init(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        if self.recorder is None:
            self.recorder = Recorder()

    module.Processor.__init__ = probed_init


class _Finder(importlib.abc.MetaPathFinder):
    """Patches the named modules right after they are executed."""

    def __init__(self, patches: dict[str, list[Any]]) -> None:
        self.patches = patches

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        todo = self.patches.get(fullname)
        if not todo:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_and_patch(module: Any) -> None:
            exec_module(module)
            for patch in todo:
                patch(module)

        loader.exec_module = exec_and_patch  # type: ignore[method-assign]
        return spec


def reset() -> None:
    """Forget what was counted: calls, slow calls, stages and the CPU so far."""
    STATS.clear()
    SLOW.clear()
    STAGES.clear()
    _SINCE["cpu_s"] = time.process_time()
    _SINCE["resets"] += 1


def _mtime(path: Path) -> int:
    """`path`'s modification time in ns, -1 when it does not exist."""
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def reset_if_touched(path: Path, seen: list[int]) -> bool:
    """reset() when `path`'s modification time differs from `seen[0]` (-1: it did not
    exist), which is then updated; True if it reset."""
    mtime = _mtime(path)
    if mtime == seen[0]:
        return False
    seen[0] = mtime
    if mtime < 0:
        return False
    reset()
    return True


def _dump(out: Path) -> None:
    doc = {
        "pid": os.getpid(),
        "argv": sys.argv,
        # the process's user + system CPU since it started, or since the last reset
        "cpu_s": round(time.process_time() - _SINCE["cpu_s"], 3),
        "resets": _SINCE["resets"],
        "functions": {k: list(v) for k, v in list(STATS.items())},
        "slow": list(SLOW),
        "stages": list(STAGES),
    }
    path = out / f"{os.getpid()}.json"
    tmp = path.with_suffix(".tmp")
    with tmp.open("w") as f:
        json.dump(doc, f)
    tmp.replace(path)


def install() -> None:
    roles = os.environ.get("BROKER_PROBE_ROLES", "broker,server").split(",")
    if not any(arg in roles for arg in sys.argv[1:]):
        return
    out = Path(os.environ["BROKER_PROBE_OUT"])
    out.mkdir(parents=True, exist_ok=True)
    slow_ns = int(float(os.environ.get("BROKER_PROBE_SLOW_MS", "5")) * 1e6)
    patches: dict[str, list[Any]] = {}
    for spec in filter(None, os.environ.get("BROKER_PROBE_FUNCS", "").split(",")):
        module, _, qualname = spec.partition(":")
        *owners, name = qualname.split(".")

        def patch(mod: Any, owners: list[str] = owners, name: str = name, spec: str = spec) -> None:
            owner = mod
            for o in owners:
                owner = getattr(owner, o)
            _wrap(owner, name, spec, slow_ns)

        patches.setdefault(module, []).append(patch)
    if os.environ.get("BROKER_PROBE_STAGES"):
        patches.setdefault("broker.network.processor", []).append(_stages)
    sys.meta_path.insert(0, _Finder(patches))

    reset_env = os.environ.get("BROKER_PROBE_RESET")
    reset_file = Path(reset_env) if reset_env else None
    seen = [_mtime(reset_file) if reset_file else -1]  # (as found at start: not a request)

    def every_second() -> None:
        while True:
            time.sleep(1)
            try:
                if reset_file is not None:
                    reset_if_touched(reset_file, seen)
                _dump(out)
            except (OSError, RuntimeError, ValueError) as exc:  # (a full disk, a race)
                sys.stderr.write(f"broker probe: could not write {out}: {exc!r}\n")

    threading.Thread(target=every_second, name="broker-probe", daemon=True).start()
    atexit.register(_dump, out)
