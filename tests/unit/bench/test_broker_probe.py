"""scripts/bench/broker_probe: a real `gregor server` started with the probe on its PYTHONPATH
records the wrapped function's calls and each request's stages, and the report sums them up;
touching BROKER_PROBE_RESET starts the counts again; without BROKER_PROBE_OUT it writes
nothing."""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest
from helpers import load_script, wait_until

ROOT = Path(__file__).resolve().parents[3]
BENCH = ROOT / "scripts" / "bench"


def _api_versions(port: int, n: int) -> None:
    from client.protocol.framing import FrameDecoder, encode_request

    with socket.create_connection(("127.0.0.1", port), timeout=10) as s:
        decoder = FrameDecoder()
        for corr in range(1, n + 1):
            s.sendall(encode_request(18, 0, corr, "probe-test", {}))
            frames: list[bytes] = []
            while not frames:
                data = s.recv(65536)
                assert data, "the server closed the connection"
                frames = decoder.feed(data)


def _server(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, probe_env: dict[str, str]):
    monkeypatch.syspath_prepend(str(BENCH))
    server = load_script("bench_server", BENCH / "_server.py")
    path = os.pathsep.join([str(BENCH / "broker_probe"), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", path)
    for key, value in probe_env.items():
        monkeypatch.setenv(key, value)
    return server, server.start_server(str(tmp_path / "data"))


def _respond_and_stages(out: Path, **more: str) -> dict[str, str]:
    """The probe's environment: RequestContext.respond wrapped and every request's stages
    recorded into `out`, with `more`."""
    return {
        "BROKER_PROBE_OUT": str(out),
        "BROKER_PROBE_FUNCS": "broker.handlers.base:RequestContext.respond",
        "BROKER_PROBE_STAGES": "1",
        **more,
    }


def test_probe_records_calls_and_stages(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "probe"
    server, srv = _server(
        monkeypatch,
        tmp_path,
        _respond_and_stages(out, BROKER_PROBE_SLOW_MS="0"),  # every call kept as a slow one
    )
    try:
        _api_versions(srv.port, 25)
    finally:
        server.stop_server(srv.proc)  # SIGTERM: a clean exit writes the file last
    files = list(out.glob("*.json"))
    assert [f.stem for f in files] == [str(srv.proc.pid)]
    report = load_script("bench_probe_report", BENCH / "broker_probe_report.py")
    got = report.summarize(json.loads(files[0].read_text()), slowest=3)
    fn = got["functions"]["broker.handlers.base:RequestContext.respond"]
    assert fn["calls"] >= 25  # (the server's own requests to itself count too)
    assert 0 < fn["cpu_us_per_call"] <= fn["wall_us_per_call"] * 1.5
    assert len(got["slowest_calls"]) == 3
    stages = got["stages"]["18 probe-test"]
    assert stages["requests"] == 25
    assert 0 < stages["total"]["p50_ms"] <= stages["total"]["max_ms"]


def test_probe_is_off_without_its_output_dir(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("BROKER_PROBE_OUT", raising=False)
    server, srv = _server(
        monkeypatch,
        tmp_path,
        {"BROKER_PROBE_FUNCS": "broker.handlers.base:RequestContext.respond"},
    )
    try:
        _api_versions(srv.port, 3)
    finally:
        server.stop_server(srv.proc)
    assert not list(tmp_path.rglob("*.json"))


def test_touching_the_reset_file_starts_the_counts_again(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """The server answers 20 requests, the reset file is touched, then 5 more: once the probe
    has noticed (it looks once a second), its file counts only what came after, and says it
    reset once."""
    out, reset = tmp_path / "probe", tmp_path / "reset"
    server, srv = _server(
        monkeypatch, tmp_path, _respond_and_stages(out, BROKER_PROBE_RESET=str(reset))
    )
    path = out / f"{srv.proc.pid}.json"
    report = load_script("bench_probe_report", BENCH / "broker_probe_report.py")

    def summary() -> dict | None:
        try:
            return report.summarize(json.loads(path.read_text()), slowest=0)
        except (OSError, ValueError):
            return None  # (not written yet)

    try:
        _api_versions(srv.port, 20)
        wait_until(
            lambda: (
                (got := summary()) and got["stages"].get("18 probe-test", {}).get("requests") == 20
            ),
            30,
            "the probe's file to count the first 20 requests",
        )
        reset.touch()
        wait_until(lambda: (got := summary()) and got["resets"] == 1, 30, "the probe to reset")
        _api_versions(srv.port, 5)
    finally:
        server.stop_server(srv.proc)  # SIGTERM: a clean exit writes the file last
    got = summary()
    assert got is not None and got["resets"] == 1
    assert got["stages"]["18 probe-test"]["requests"] == 5
    assert 5 <= got["functions"]["broker.handlers.base:RequestContext.respond"]["calls"] < 25
    assert 0 <= got["cpu_s"] < 5
