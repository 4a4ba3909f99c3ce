"""The CLI as a stand-in for kcat (issue 22, items 4 and 7), as subprocesses against a real
`gregor server`: consume's format strings, --print-* columns and JSON envelope; produce's
headers, key separator, partition and JSON input; a closed pipe ends any command without a
traceback; progress lines only on a terminal; topics create --replica-assignment; the member
host in groups describe."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import threading

import pytest
from helpers import gregor_command, wait_until

from client import Producer


def gregor(
    *args: str, stdin: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*gregor_command(), *args], input=stdin, capture_output=True, text=True, timeout=timeout
    )


@pytest.fixture
def bs(gregor_process) -> list[str]:
    return ["--bootstrap-server", gregor_process().bootstrap]


def _consume(topic: str, n: int, bs: list[str], *extra: str) -> subprocess.CompletedProcess:
    r = gregor("consume", topic, "--from-beginning", "--max-messages", str(n), *extra, *bs)
    assert r.returncode == 0, r.stderr
    return r


def test_produce_headers_key_separator_partition_and_consume_format(bs) -> None:
    assert gregor("topics", "create", "f", "--partitions", "3", *bs).returncode == 0
    r = gregor("produce", "f", "-K", ":", "-H", "h1=x", "--header", "h2=a=b", "-p", "2", *bs,
               stdin="k1:v1\nk2:v2\nno-key\n")  # fmt: skip
    assert r.returncode == 0, r.stderr
    out = _consume("f", 3, bs, "--format", "%t|%p|%o|%k|%K|%h|%s|%S\\n").stdout.splitlines()
    assert out == [
        "f|2|0|k1|2|h1=x,h2=a=b|v1|2",
        "f|2|1|k2|2|h1=x,h2=a=b|v2|2",
        "f|2|2||-1|h1=x,h2=a=b|no-key|6",
    ]
    stamps = _consume("f", 3, bs, "-f", "%T\\n").stdout.split()
    assert len(stamps) == 3 and all(s.isdigit() and int(s) > 1_600_000_000_000 for s in stamps)
    # kcat adds nothing after a format: without \n the records run together
    assert _consume("f", 3, bs, "-f", "%o").stdout == "012"
    cols = _consume("f", 3, bs, "--print-partition", "--print-offset", "--print-headers",
                    "--print-key").stdout.splitlines()  # fmt: skip
    assert cols[0] == "Partition:2\tOffset:0\th1:x,h2:a=b\tk1\tv1"
    assert cols[2] == "Partition:2\tOffset:2\th1:x,h2:a=b\tnull\tno-key"


def test_bad_format_header_and_partition_fail_at_once(bs) -> None:
    assert gregor("topics", "create", "b", *bs).returncode == 0
    r = gregor("consume", "b", "-f", "%q", "--timeout-ms", "100", *bs)
    assert r.returncode == 1 and "unknown format token %q" in r.stderr
    r = gregor("consume", "b", "-f", "%s", "--print-key", "--timeout-ms", "100", *bs)
    assert r.returncode == 1 and "give one" in r.stderr
    r = gregor("produce", "b", "-H", "nameonly", *bs, stdin="x\n")
    assert r.returncode == 1 and "expected NAME=VALUE" in r.stderr
    # the producer would otherwise wait max.block.ms (60 s) for a partition that never comes
    r = gregor("produce", "b", "--partition", "4", *bs, stdin="x\n", timeout=30)
    assert r.returncode == 1 and "has 1 partition(s)" in r.stderr


def test_json_out_and_in_round_trip(bs) -> None:
    assert gregor("topics", "create", "j", "--partitions", "2", *bs).returncode == 0
    lines = [
        {"value": "v0", "key": "k0", "headers": {"a": "1"}, "partition": 1},
        {"payload": "v1", "headers": ["b", "2", "c", None], "partition": 0, "ts": 1700000000000},
        {"value": {"nested": [1, 2]}, "partition": 0},
        {"value": None, "key": "tomb", "partition": 0},
    ]
    stdin = "\n".join(json.dumps(x) for x in lines) + "\n"
    r = gregor("produce", "j", "--json", "-H", "all=yes", *bs, stdin=stdin)
    assert r.returncode == 0, r.stderr
    out = [json.loads(x) for x in _consume("j", 4, bs, "-J").stdout.splitlines()]
    got = sorted(out, key=lambda o: (o["partition"], o["offset"]))
    assert [set(o) for o in got] == [
        {"topic", "partition", "offset", "tstype", "ts", "headers", "key", "payload"}
    ] * 4
    assert [(o["partition"], o["offset"], o["key"], o["payload"]) for o in got] == [
        (0, 0, None, "v1"),
        (0, 1, None, '{"nested":[1,2]}'),
        (0, 2, "tomb", None),
        (1, 0, "k0", "v0"),
    ]
    assert got[0]["ts"] == 1700000000000 and got[0]["tstype"] == "create"
    assert got[0]["headers"] == ["b", "2", "c", None, "all", "yes"]
    assert got[3]["headers"] == ["a", "1", "all", "yes"]
    # consume -J | produce -J copies a topic exactly (partitions, keys, headers, timestamps)
    assert gregor("topics", "create", "j2", "--partitions", "2", *bs).returncode == 0
    dump = _consume("j", 4, bs, "-J").stdout
    assert gregor("produce", "j2", "-J", *bs, stdin=dump).returncode == 0
    copy = [json.loads(x) for x in _consume("j2", 4, bs, "-J").stdout.splitlines()]
    strip = [{k: v for k, v in o.items() if k != "topic"} for o in out]
    assert sorted(map(json.dumps, [{k: v for k, v in o.items() if k != "topic"} for o in copy])) \
        == sorted(map(json.dumps, strip))  # fmt: skip
    r = gregor("produce", "j", "-J", *bs, stdin='{"value": "ok"}\n{"valu": "typo"}\n')
    assert r.returncode == 1 and "line 2: unknown field(s) valu" in r.stderr


def _fill(bootstrap: str, topic: str, n: int, size: int = 100) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as p:
        p.send_many(topic, [b"x" * size] * n, partition=0).result(60)


def _into_head(*args: str) -> tuple[int, str, str]:
    """`gregor ARGS | head -1`: (gregor's exit status, its stderr, head's output)."""
    gp = subprocess.Popen([*gregor_command(), *args], stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE)  # fmt: skip
    head = subprocess.Popen(["head", "-1"], stdin=gp.stdout, stdout=subprocess.PIPE)
    assert gp.stdout is not None and gp.stderr is not None
    gp.stdout.close()  # head alone holds the read end: its exit closes the pipe
    first = head.communicate(timeout=60)[0].decode()
    err = gp.stderr.read().decode()
    return gp.wait(60), err, first


def test_a_closed_pipe_ends_commands_without_a_traceback(bs) -> None:
    # 5,000 lines of 100 bytes: far more than a pipe holds, so writes meet the closed pipe
    assert gregor("topics", "create", "many", *bs).returncode == 0
    _fill(bs[1], "many", 5000)
    code, err, first = _into_head("consume", "many", "--from-beginning", *bs)
    assert first == "x" * 100 + "\n"
    assert code == 141, err
    assert "Traceback" not in err and "BrokenPipe" not in err, err
    for args in (["cluster", "status"], ["topics", "describe"], ["topics", "list"]):
        code, err, first = _into_head(*args, *bs)
        assert code in (0, 141) and first, (args, err)
        assert "Traceback" not in err, (args, err)


def _on_pty_stderr(args: list[str], stdin: bytes | None = None) -> tuple[int, bytes, bytes]:
    """Run gregor with stderr on a pseudo-terminal and stdout on a pipe: (status, stdout,
    what the terminal got)."""
    master, slave = pty.openpty()
    proc = subprocess.Popen([*gregor_command(), *args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=slave)  # fmt: skip
    os.close(slave)
    got = bytearray()

    def drain() -> None:
        while True:
            try:
                chunk = os.read(master, 4096)
            except OSError:  # EIO: every holder of the terminal's other end is gone
                return
            if not chunk:
                return
            got.extend(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    out, _ = proc.communicate(stdin, timeout=120)
    reader.join(30)
    os.close(master)
    return proc.returncode, out, bytes(got)


@pytest.mark.slow
def test_progress_shows_on_a_terminal_only(bs) -> None:
    assert gregor("topics", "create", "pr", *bs).returncode == 0
    # perf at 200 records/s for 2 s: at least one live line, with rate and latency
    perf = ["perf", "produce", "--topic", "pr", "--num-records", "400", "--throughput", "200",
            "--record-size", "10", *bs]  # fmt: skip
    code, out, tty = _on_pty_stderr(perf)
    assert code == 0, tty
    assert json.loads(out)["records"] == 400
    assert b"records/s" in tty and b"ms avg latency" in tty and b"ms max latency" in tty, tty
    # piped: nothing but the JSON (the existing perf test checks stderr is empty)
    r = gregor(*perf)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    # consume to a pipe, stderr a terminal: a count while it waits out --timeout-ms
    code, out, tty = _on_pty_stderr(["consume", "pr", "--from-beginning", "--timeout-ms", "2500",
                                     *bs])  # fmt: skip
    assert code == 0 and out.count(b"\n") == 800, tty  # both perf runs
    assert b"consumed: 800 records" in tty, tty
    # consume and produce piped both ways: only their one-line summary
    r = _consume("pr", 400, bs)
    assert r.stderr == "Processed 400 records.\n"
    r = gregor("produce", "pr", *bs, stdin="a\nb\n")
    assert r.returncode == 0 and r.stderr == "Produced 2 records to pr.\n"


def test_topics_create_with_a_replica_assignment(bs) -> None:
    r = gregor("topics", "create", "ra", "--replica-assignment", "1,1,1", *bs)
    assert r.returncode == 0, r.stderr
    desc = json.loads(gregor("topics", "describe", "ra", "--json", *bs).stdout)[0]
    assert [(p["partition"], p["replicas"], p["leader"]) for p in desc["partitions"]] == [
        (0, [1], 1),
        (1, [1], 1),
        (2, [1], 1),
    ]
    for bad, why in (("1:2", "unknown brokers [2]"), ("1:1", "duplicate broker ids [1, 1]")):
        r = gregor("topics", "create", "rb", "--replica-assignment", bad, *bs)
        assert r.returncode == 1 and "INVALID_REPLICA_ASSIGNMENT" in r.stderr, r.stderr
        assert why in r.stderr
    r = gregor("topics", "create", "rb", "--replica-assignment", "1:x", *bs)
    assert r.returncode == 1 and "is not broker ids separated by ':'" in r.stderr
    r = gregor("topics", "create", "rb", "--replica-assignment", "1", "--partitions", "1", *bs)
    assert r.returncode == 2 and "not allowed with" in r.stderr
    r = gregor("topics", "create", "rb", "--replica-assignment", "1", "--replication-factor",
               "1", *bs)  # fmt: skip
    assert r.returncode == 1 and "drop --replication-factor" in r.stderr
    assert "rb" not in gregor("topics", "list", *bs).stdout.split()


def test_groups_describe_shows_the_member_host(bs) -> None:
    assert gregor("topics", "create", "gh", *bs).returncode == 0
    member = subprocess.Popen(
        [*gregor_command(), "consume", "gh", "--group", "hosts", "--timeout-ms", "60000", *bs],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:

        def described() -> dict | None:
            r = gregor("groups", "describe", "hosts", "--json", *bs)
            d = json.loads(r.stdout) if r.returncode == 0 else None
            return d if d and d["members"] and d["members"][0]["assignment"] else None

        d = wait_until(described, 30, "a member owning gh-0")
        assert d["members"][0]["client_host"] == "/127.0.0.1"
        text = gregor("groups", "describe", "hosts", *bs).stdout
        assert "HOST" in text.splitlines()[1] and "/127.0.0.1" in text.splitlines()[2], text
        assert "host /127.0.0.1" in text
    finally:
        member.terminate()
        member.wait(30)
