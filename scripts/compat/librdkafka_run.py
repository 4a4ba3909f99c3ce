"""Run librdkafka's test suite (a built tests/ directory) against a fresh 3-controller,
3-broker Gregor cluster whose brokers have a KAFKA listener; print JSON counts.

    librdkafka_run.py --tests-dir DIR --exclude FILE [--only 0001,0012] [--keep]

Called by scripts/compat/librdkafka_tests.sh, which builds DIR. The cluster is `gregor cluster
up` on configs written here (the cluster's own writer, plus a KAFKA listener per broker and the
suite's default scenario: auto-created topics with 4 partitions, replication factor 3). The
runner's test.conf names the KAFKA listeners. Each test runs in its own test-runner process
(TESTS=NNNN, full mode unless --quick, broker version --broker-version) under a deadline, so a crash or hang
is that test's failure only. Tests flagged TEST_F_LOCAL in tests/test.c do not talk to a broker
and are not run (counted as "local"); excluded ones are listed with their reasons in FILE
("NNNN reason"). A line "NNNN:sub_test reason" excludes one sub-test only (the function
that opens it with SUB_TEST in the test's source): that test then runs once per other
sub-test its main function calls (SUBTESTS="name:", one runner process each), and passes
when each of them does. Output: {"passed", "failed", "excluded", "local", "skipped_by_runner",
"failed_tests", "seconds", "load_average"}; progress and failing tests' tails on stderr.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GREGOR = [str(Path(sys.executable).parent / "gregor")]
TEST_ENTRY = re.compile(r"_TEST\(\s*(\d{4})_(\w+)\s*,\s*([^,)]*)")
# "==== Test NNNN_name PASSED ====" lines, and the summary table's "| NNNN_name | SKIPPED |"
# (a test the runner filters, e.g. a known issue, has only the latter)
VERDICT = re.compile(r"(?:=+ Test |\|\s*)(\d{4})_\w+(?: |\s*\|\s*)(PASSED|FAILED|SKIPPED)\b")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def say(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


def suite(tests_dir: Path) -> dict[str, tuple[str, bool]]:
    """{number: (name, local)} from test.c's table of tests (the 0000-0999 series)."""
    text = (tests_dir / "test.c").read_text(errors="replace")
    table = text[text.index("struct test tests[]") :]
    out = {}
    for num, name, flags in TEST_ENTRY.findall(table):
        if int(num) < 1000:
            out[num] = (name, "TEST_F_LOCAL" in flags)
    return out


def excluded(path: Path) -> tuple[dict[str, str], dict[str, dict[str, str]]]:
    """({number: reason}, {number: {sub_test: reason}}) from lines `NNNN reason` and
    `NNNN:sub_test reason` (# comments, blank lines skipped)."""
    whole: dict[str, str] = {}
    subs: dict[str, dict[str, str]] = {}
    for raw in path.read_text().splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        key, _, reason = line.partition(" ")
        m = re.fullmatch(r"(\d{4})(?::(\w+))?", key)
        if m is None or not reason.strip():
            raise SystemExit(f"{path}: expected 'NNNN[:sub_test] reason', got {raw!r}")
        if m.group(2):
            subs.setdefault(m.group(1), {})[m.group(2)] = reason.strip()
        else:
            whole[m.group(1)] = reason.strip()
    return whole, subs


FUNCTION = re.compile(r"^(?:static\s+)?\w+\s+\**(\w+)\s*\(", re.M)


def sub_tests(tests_dir: Path, num: str, name: str) -> list[str]:
    """The sub-test functions (those that open a SUB_TEST) that main_NNNN_name calls,
    directly or through the file's other functions (0081's main calls do_test_apis, which
    calls them), in the order of their first call."""
    [src] = [p for p in tests_dir.glob(f"{num}-*") if p.suffix in (".c", ".cpp")]
    text = src.read_text(errors="replace")
    starts = [(m.start(), m.group(1)) for m in FUNCTION.finditer(text)]
    fns = set()
    for m in re.finditer(r"\bSUB_TEST\w*\(", text):
        enclosing = [fn for pos, fn in starts if pos < m.start()]
        if enclosing:
            fns.add(enclosing[-1])
    bodies: dict[str, str] = {}
    for pos, fn in starts:
        end = text.find("\n}\n", pos)
        if end > 0 and fn not in bodies:
            bodies[fn] = text[pos:end]
    found: list[str] = []
    seen: set[str] = set()

    def walk(fn: str) -> None:
        seen.add(fn)
        calls = re.findall(r"\b(\w+)\s*\(", bodies[fn].split("{", 1)[-1])
        for c in dict.fromkeys(calls):
            if c in fns:
                found.append(c)
            elif c in bodies and c not in seen:
                walk(c)

    walk(f"main_{num}_{name}")
    return list(dict.fromkeys(found))


def _free(port: int) -> bool:
    with socket.socket() as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


def free_base_port() -> int:
    """A base port P with P..P+2 (brokers), P+20..P+22 (KAFKA) and P+101..P+103 free."""
    rng = random.Random()
    for _ in range(200):
        base = rng.randrange(20000, 40000, 10)
        ports = [base + i for i in (0, 1, 2, 20, 21, 22, 101, 102, 103)]
        if all(_free(p) for p in ports):
            return base
    raise SystemExit("no free ports for the cluster")


def _scenario(config: str) -> str:
    """The suite's default scenario (tests/scenarios/default.json, on Kafka's defaults):
    auto-created topics with 4 partitions, and min.insync.replicas 1, Kafka's default (tests
    create topics of replication factor 1 and produce with acks=all)."""
    config = re.sub(r"(?m)^min\.insync\.replicas: .*$", "min.insync.replicas: 1", config)
    assert "min.insync.replicas: 1" in config, config
    return config + "num.partitions: 4\n"


class Cluster:
    """`gregor cluster up` in DIR with a KAFKA listener on each broker; `stop()` ends it."""

    def __init__(self, data_dir: Path) -> None:
        from broker.cluster_nodes import write_configs

        shutil.rmtree(data_dir, ignore_errors=True)
        self.dir = data_dir
        base = free_base_port()
        nodes = write_configs(data_dir, 3, 3, base)
        self.kafka = []
        for i, node in enumerate(n for n in nodes if n.role == "broker"):
            path = data_dir / f"{node.name}.yaml"
            port = base + 20 + i
            text = path.read_text().replace(
                f"listeners: PLAINTEXT://127.0.0.1:{base + i}",
                f"listeners: PLAINTEXT://127.0.0.1:{base + i},KAFKA://127.0.0.1:{port}",
            )
            assert f"KAFKA://127.0.0.1:{port}" in text, text
            path.write_text(_scenario(text))
            self.kafka.append(f"127.0.0.1:{port}")
        for node in nodes:
            if node.role == "controller":
                path = data_dir / f"{node.name}.yaml"
                path.write_text(_scenario(path.read_text()))
        self.log = open(data_dir / "cluster-up.log", "wb")  # noqa: SIM115  (closed in stop)
        self.proc = subprocess.Popen(
            [*GREGOR, "cluster", "up", "--data-dir", str(data_dir)],
            stdout=self.log,
            stderr=subprocess.STDOUT,
            cwd=ROOT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 180
        while b"bootstrap servers" not in (data_dir / "cluster-up.log").read_bytes():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                tail = (data_dir / "cluster-up.log").read_text(errors="replace")[-2000:]
                raise SystemExit(f"the cluster did not come up:\n{tail}")
            time.sleep(0.5)

    def stop(self) -> None:
        subprocess.run(
            [*GREGOR, "cluster", "down", "--data-dir", str(self.dir)],
            cwd=ROOT,
            capture_output=True,
            timeout=180,
            check=False,
        )
        try:
            self.proc.wait(60)
        except subprocess.TimeoutExpired:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        self.log.close()


def run_one(
    tests_dir: Path, num: str, args: argparse.Namespace, sub_test: str | None = None
) -> tuple[str, str]:
    """(PASSED | FAILED | SKIPPED, output tail) of one test (or one of its sub-tests) in its
    own runner process."""
    env = {**os.environ, "TESTS": num, "TEST_KAFKA_VERSION": args.broker_version}
    if sub_test is not None:
        env["SUBTESTS"] = f"{sub_test}:"  # test.c matches "function:line" by substring
    env["LD_LIBRARY_PATH"] = f"{tests_dir.parent / 'src'}:{tests_dir.parent / 'src-cpp'}"
    # -E: no sockem (the runner's socket fault injector); -Q (--quick): quick mode, where a
    # test runs only its sub-tests marked quick (some then run nothing at all)
    cmd = [str(tests_dir / "test-runner"), "-E", *(["-Q"] if args.quick else [])]
    try:
        p = subprocess.run(
            cmd,
            cwd=tests_dir,
            env=env,
            capture_output=True,
            timeout=args.test_timeout,
            start_new_session=True,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        out = ANSI.sub("", ((exc.stdout or b"") + (exc.stderr or b"")).decode(errors="replace"))
        return "FAILED", f"timed out after {args.test_timeout}s\n{out}"
    out = ANSI.sub("", (p.stdout + p.stderr).decode(errors="replace"))
    states = {m.group(2) for m in VERDICT.finditer(out) if m.group(1) == num}
    # (two tests may share a number, e.g. 0053_stats and 0053_stats_timing: TESTS runs both)
    if p.returncode == 0 and states == {"SKIPPED"}:
        return "SKIPPED", out
    if p.returncode == 0 and "PASSED" in states and "FAILED" not in states:
        return "PASSED", out
    return "FAILED", f"exit status {p.returncode}\n{out}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tests-dir", type=Path, required=True)
    ap.add_argument("--exclude", type=Path, required=True)
    ap.add_argument("--only", default="", help="comma-separated test numbers")
    ap.add_argument("--broker-version", default="3.1.0", help="what the runner assumes")
    ap.add_argument("--test-timeout", type=float, default=300.0)
    ap.add_argument("--timeout-multiplier", type=float, default=3.0)
    ap.add_argument("--keep", action="store_true", help="leave the cluster's directory")
    ap.add_argument("--quick", action="store_true", help="the runner's quick mode (-Q)")
    args = ap.parse_args()
    tests = suite(args.tests_dir)
    skip, skip_subs = excluded(args.exclude)
    unknown = sorted((set(skip) | set(skip_subs)) - set(tests))
    if unknown:
        raise SystemExit(f"{args.exclude}: not tests of this suite: {unknown}")
    runs: dict[str, list[str | None]] = {}
    for num, subs in skip_subs.items():
        all_subs = sub_tests(args.tests_dir, num, tests[num][0])
        missing = sorted(set(subs) - set(all_subs))
        if missing:
            raise SystemExit(f"{args.exclude}: not sub-tests of {num}: {missing}")
        runs[num] = [t for t in all_subs if t not in subs]
    wanted = sorted(tests) if not args.only else sorted(args.only.split(","))
    to_run = [n for n in wanted if n in tests and not tests[n][1] and n not in skip]
    data_dir = ROOT / ".compat-cache" / "librdkafka" / "cluster"
    # SIGTERM (and SIGINT, which a background job ignores) end the run through `finally`:
    # the running test's process is killed and the cluster stopped
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    started = time.monotonic()
    cluster = Cluster(data_dir)
    counts = {"passed": 0, "failed": 0, "skipped_by_runner": 0}
    failed: list[str] = []
    try:
        (args.tests_dir / "test.conf").write_text(
            f"metadata.broker.list={','.join(cluster.kafka)}\n"
            f"test.timeout.multiplier={args.timeout_multiplier}\n"
        )
        say(f"cluster up: KAFKA listeners {','.join(cluster.kafka)}; {len(to_run)} tests to run")
        for num in to_run:
            t0 = time.monotonic()
            if num in runs:  # one process per sub-test not excluded; the first failure ends it
                state, out = "PASSED", ""
                for sub in runs[num]:
                    state, out = run_one(args.tests_dir, num, args, sub)
                    say(f"{num}_{tests[num][0]} {sub}: {state}")
                    if state == "FAILED":
                        break
            else:
                state, out = run_one(args.tests_dir, num, args)
            say(f"{num}_{tests[num][0]}: {state} ({time.monotonic() - t0:.0f} s)")
            if state == "FAILED":
                failed.append(f"{num}_{tests[num][0]}")
                say("    " + "\n    ".join(out.splitlines()[-25:]))
            counts[
                {"PASSED": "passed", "FAILED": "failed", "SKIPPED": "skipped_by_runner"}[state]
            ] += 1
    finally:
        cluster.stop()
        if not args.keep:
            shutil.rmtree(data_dir, ignore_errors=True)
    result = {
        **counts,
        "excluded": sum(1 for n in wanted if n in skip),
        "excluded_sub_tests": sum(len(skip_subs[n]) for n in wanted if n in skip_subs),
        "local": sum(1 for n in wanted if n in tests and tests[n][1]),
        "failed_tests": failed,
        "mode": "quick" if args.quick else "full",
        "broker_version_assumed": args.broker_version,
        "seconds": round(time.monotonic() - started),
        "load_average": os.getloadavg()[0],
    }
    print(json.dumps(result, indent=1))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
