"""Helpers every test may import (`from helpers import wait_until, RawClient, ...`): tests/ is on
sys.path because tests/conftest.py lives there (pytest's default `prepend` import mode)."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TypeVar

T = TypeVar("T")


def load_script(name: str, path: Path) -> Any:
    """The script at `path` (e.g. scripts/bench/compare.py) imported as module `name`, and
    registered in sys.modules under it (a dataclass of it looks its module up there)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def wait_until(
    cond: Callable[[], T], timeout: float = 10.0, msg: str = "condition", interval: float = 0.005
) -> T:
    """Poll `cond` until it returns a truthy value (returned) or `timeout` seconds pass
    (AssertionError naming `msg`). The poll interval backs off from `interval` to 50 ms."""
    deadline = time.monotonic() + timeout
    delay = interval
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {msg}")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.05)


async def async_wait_until(
    cond: Callable[[], T], timeout: float = 10.0, msg: str = "condition", interval: float = 0.002
) -> T:
    """`wait_until` for coroutines: poll `cond` on the running loop (yielding to it between
    polls) until truthy, or fail with AssertionError naming `msg` after `timeout` seconds."""
    import asyncio

    deadline = time.monotonic() + timeout
    while True:
        value = cond()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:.1f}s waiting for {msg}")
        await asyncio.sleep(interval)


def returns_within(fn: Callable[[], T], timeout: float, msg: str) -> T:
    """Call `fn` on a helper thread and wait for it to return, with a deadline: its result, or
    the exception it raised; AssertionError naming `msg` if it is still running after `timeout`
    seconds. For "answers at once instead of waiting for its long timeout" checks: give the
    slow path a timeout far beyond `timeout`, and `timeout` far beyond the fast path, so a hang
    fails the test and a slow machine does not. The thread has ended when this returns."""
    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = fn()
        except BaseException as e:  # re-raised on the caller's thread
            outcome["error"] = e

    t = threading.Thread(target=run, name=f"returns-within: {msg}", daemon=True)
    started = time.monotonic()
    t.start()
    wait_until(lambda: not t.is_alive(), timeout, msg)
    t.join()
    print(f"{msg}: {time.monotonic() - started:.3f}s")
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def poll_n(consumer: Any, n: int, timeout: float = 10.0) -> list:
    """Poll a (blocking) Consumer until it has returned `n` records; fails after `timeout` s."""
    out: list = []
    deadline = time.monotonic() + timeout
    while len(out) < n:
        assert time.monotonic() < deadline, f"got {len(out)} of {n} records"
        out += consumer.poll(timeout_ms=200)
    return out


def known_partitions(bootstrap: str, topic: str) -> list | None:
    """`topic`'s partitions as the broker an Admin on `bootstrap` asks sees them; None while
    that broker has not applied the topic yet (create_topic waits until the broker it asked
    shows the topic, not every broker: Kafka's describeTopics answers the same)."""
    from client import Admin
    from client.errors import UnknownTopicOrPartitionError

    try:
        with Admin(bootstrap_servers=bootstrap) as admin:
            return admin.describe_topic(topic).partitions
    except UnknownTopicOrPartitionError:
        return None


def read_to_end(bootstrap: str, topic: str, partition: int = 0, timeout: float = 60.0) -> list:
    """Every record of one partition, from offset 0 to its end offset when asked (a compacted
    log's gaps included); fails after `timeout` s."""
    from client import Consumer, TopicPartition

    tp = TopicPartition(topic, partition)
    out: list = []
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as c:
        c.assign([tp])
        c.seek(tp, 0)
        end = c.end_offsets([tp])[tp]
        deadline = time.monotonic() + timeout
        while c.position(tp) < end:
            assert time.monotonic() < deadline, f"position {c.position(tp)} never reached {end}"
            out += c.poll(timeout_ms=200)
    return out


class GatedDispatch:
    """A broker `dispatch` that records each request's correlation id and holds it until
    `gate` is set (at most `timeout` s), then dispatches it: for tests of what the broker does
    while a request is in flight."""

    def __init__(self, timeout: float = 30.0) -> None:
        self.gate = threading.Event()
        self.seen: list[int] = []
        self._timeout = timeout

    def __call__(self, request: Any, services: Any) -> None:
        from broker.handlers import dispatch

        self.seen.append(request.correlation_id)
        self.gate.wait(self._timeout)
        dispatch(request, services)


# -- broker config and handles -------------------------------------------------------------------


def broker_config(data_dir: Path | str, **overrides: Any) -> Any:
    """A broker config for tests: 127.0.0.1, ephemeral port, `data_dir`, plus `overrides`
    given as dotted keys with dots written as underscores (num_io_threads=2) or as a dict
    via `**{"num.io.threads": 2}`."""
    values: dict[str, Any] = {"listeners": "PLAINTEXT://127.0.0.1:0", "log.dirs": str(data_dir)}
    for key, value in overrides.items():
        values[key if "." in key else key.replace("_", ".")] = value
    from client.config import load_config

    return load_config("broker", None, {}, {k: str(v) for k, v in values.items()})


@dataclass
class BrokerHandle:
    server: Any
    host: str
    port: int
    data_dir: Path

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)


def gregor_command() -> list[str]:
    """The installed `gregor` console script next to this interpreter, else `python -m`."""
    script = Path(sys.executable).with_name("gregor")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-m", "broker.cli"]


READY_LINE = re.compile(
    r"gregor \w+ listening on \[?(?P<host>[^\]\s]+?)\]?:(?P<port>\d+), data in (?P<data>.+) "
    r"\(node (?P<node>-?\d+)\)"
)


class GregorProcess:
    """A `gregor` subprocess (own session). `wait_ready` parses the listening line."""

    def __init__(
        self, proc: subprocess.Popen, data_dir: Path, stderr_path: Path, stderr: IO
    ) -> None:
        self.proc = proc
        self.data_dir = data_dir
        self.stderr_path = stderr_path
        self._stderr = stderr
        self._lines: queue.Queue[str | None] = queue.Queue()
        self.stdout_lines: list[str] = []
        self.started_at = time.monotonic()
        self.ready_s: float | None = None
        self.host = ""
        self.port = 0
        self._reader = threading.Thread(target=self._read_stdout, daemon=True)
        self._reader.start()

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            line = raw.decode(errors="replace").rstrip("\n")
            self.stdout_lines.append(line)
            self._lines.put(line)
        self._lines.put(None)

    def wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(
                    f"gregor not ready within {timeout}s; stderr:\n{self.stderr()}"
                )
            try:
                line = self._lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                self.proc.wait(5)
                raise AssertionError(
                    f"gregor exited ({self.proc.returncode}) before ready; stderr:\n{self.stderr()}"
                )
            m = READY_LINE.search(line)
            if m:
                self.ready_s = time.monotonic() - self.started_at
                self.host, self.port = m["host"], int(m["port"])
                return

    @property
    def bootstrap(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def address(self) -> tuple[str, int]:
        return (self.host, self.port)

    def listeners(self, *names: str, timeout: float = 30.0) -> dict[str, str]:
        """{listener name: bound host:port} from the start-up lines of a server with several
        listeners, once every one of `names` is there (they follow the ready line, so they
        may not have been read yet when wait_ready returns)."""

        def bound() -> dict[str, str]:
            return {
                line.split()[1].rstrip(":"): line.split("bound ")[1].split(",")[0]
                for line in list(self.stdout_lines)
                if line.strip().startswith("listener ")
            }

        return wait_until(
            lambda: (lambda b: b if all(n in b for n in names) else None)(bound()),
            timeout,
            f"the start-up lines of listeners {', '.join(names)}",
        )

    def stderr(self) -> str:
        self._stderr.flush()
        return self.stderr_path.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 120.0) -> int:
        """Send `sig` to the process group and wait for the exit; returns the exit status. A
        process still running after `timeout` is asked for its threads' stacks (SIGQUIT), killed,
        and the failure shows its stderr's tail with those stacks."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                told = self.stderr().count("most recent call first")
                os.killpg(self.proc.pid, signal.SIGQUIT)
                sizes = [-1]

                def written_out() -> bool:  # two reads 50 ms apart find stderr the same size
                    sizes.append(len(self.stderr()))
                    return sizes[-1] == sizes[-2]

                with suppress(AssertionError):
                    wait_until(lambda: self.stderr().count("most recent call first") > told, 10)
                    wait_until(written_out, 5, interval=0.05)
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(30)
                raise AssertionError(
                    f"gregor (pid {self.proc.pid}) still running {timeout:.0f}s after signal "
                    f"{signal.Signals(sig).name}; its stderr's tail, with its threads' stacks:\n"
                    + self.stderr()[-30_000:]
                ) from None
        return self.proc.returncode

    def close(self) -> None:
        self._stderr.close()
        if self.proc.stdout is not None:
            self.proc.stdout.close()

    def __enter__(self) -> GregorProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        """Kill the process group if it still runs, then close (a test's way out)."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(30)
        self.close()


def spawn_gregor(
    args: list[str], data_dir: Path, stderr_path: Path, group: int | None = None
) -> GregorProcess:
    """Start `gregor ARGS` in its own session (its pid is its process-group id), without the
    caller's GREGOR_* environment, stderr to `stderr_path`; wait_ready() on the result. `group`:
    run it with that gid (root only), so iptables' owner match can tell its packets apart."""
    err = open(stderr_path, "wb")  # noqa: SIM115 - closed by GregorProcess.close()
    env = {k: v for k, v in os.environ.items() if not k.startswith("GREGOR_")}
    proc = subprocess.Popen(
        [*gregor_command(), *args],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=err,
        env=env,
        start_new_session=True,
        group=group,
    )
    return GregorProcess(proc, data_dir, stderr_path, err)


@contextmanager
def gregor_server(
    data_dir: Path, stderr_path: Path, *opts: str, timeout: float = 30.0
) -> Iterator[GregorProcess]:
    """`gregor server --port 0 --data-dir DATA_DIR OPTS`, ready; SIGKILLed (its process group)
    on the way out if still alive, for tests that restart a server on the same dir themselves."""
    args = ["server", "--port", "0", "--data-dir", str(data_dir), *opts]
    with spawn_gregor(args, data_dir, stderr_path) as gp:
        gp.wait_ready(timeout)
        yield gp


# -- a raw protocol client -----------------------------------------------------------------------


class RawClient:
    """A blocking socket speaking the frame protocol byte by byte, for network-layer tests."""

    def __init__(self, address: tuple[str, int], timeout: float = 10.0) -> None:
        from client.protocol.framing import FrameDecoder

        self.sock = socket.create_connection(address, timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.timeout = timeout
        self._decoder = FrameDecoder(1 << 30)
        self._frames: list[bytes] = []

    def send_raw(self, data: bytes) -> None:
        self.sock.sendall(data)

    def send(
        self, api_key: int, api_version: int, correlation_id: int, body: dict, client_id: str = "t"
    ) -> None:
        from client.protocol.framing import encode_request

        self.sock.sendall(encode_request(api_key, api_version, correlation_id, client_id, body))

    def recv(self, timeout: float | None = None) -> tuple[int, dict]:
        """The next response (correlation_id, body); AssertionError on EOF or timeout."""
        from client.protocol.framing import decode_response

        deadline = time.monotonic() + (timeout if timeout is not None else self.timeout)
        while not self._frames:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError("no response before the deadline")
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            if not data:
                raise AssertionError("connection closed by the broker")
            self._frames.extend(self._decoder.feed(data))
        return decode_response(self._frames.pop(0))

    def request(self, api_key: int, api_version: int, body: dict, correlation_id: int = 1) -> dict:
        self.send(api_key, api_version, correlation_id, body)
        corr, resp = self.recv()
        assert corr == correlation_id, (corr, correlation_id)
        return resp

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the broker closed the connection (EOF or reset) within `timeout`; any
        response bytes arriving meanwhile are discarded."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            self.sock.settimeout(remaining)
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                return False
            except (ConnectionResetError, BrokenPipeError):
                return True
            if not data:
                return True

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def api_versions_ok(address: tuple[str, int], timeout: float = 10.0) -> dict:
    """A fresh connection's ApiVersions round trip; returns the body (asserts error_code 0)."""
    with RawClient(address, timeout) as c:
        body = c.request(18, 0, {}, correlation_id=4242)
    assert body["error_code"] == 0, body
    assert any(k["api_key"] == 18 for k in body["api_keys"]), body
    return body
