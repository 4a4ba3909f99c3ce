"""The README's "From Python" snippet runs, and runs again, against a real server (issue 22,
item 7): the second run used to stop with TopicAlreadyExistsError, now create_topic(...,
exist_ok=True) lets it through. The snippet is taken from README.md itself, with only the
bootstrap address changed to the test server's."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from client import Admin
from client.errors import TopicAlreadyExistsError

README = Path(__file__).resolve().parents[2] / "README.md"


def _snippet() -> str:
    text = README.read_text()
    m = re.search(r"From Python:\s*```python\n(.*?)```", text, re.S)
    assert m, "README.md has no ```python block after 'From Python:'"
    return m[1]


def test_readme_python_snippet_runs_twice(gregor_process) -> None:
    gp = gregor_process()
    code = _snippet()
    assert "127.0.0.1:9092" in code
    code = code.replace("127.0.0.1:9092", gp.bootstrap)
    offsets = []
    for _ in range(2):
        out = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
        )
        assert out.returncode == 0, out.stderr[-3000:]
        assert "Traceback" not in out.stderr and "Task was destroyed" not in out.stderr, out.stderr
        partition, offset = out.stdout.splitlines()[0].split()
        offsets.append((int(partition), int(offset)))
    assert offsets[1] == (offsets[0][0], offsets[0][1] + 1), offsets  # the same topic, once


def test_create_topic_exist_ok(gregor_process) -> None:
    gp = gregor_process()
    with Admin(bootstrap_servers=gp.bootstrap) as admin:
        admin.create_topic("twice", partitions=2)
        with pytest.raises(TopicAlreadyExistsError):
            admin.create_topic("twice", partitions=2)
        admin.create_topic("twice", partitions=3, exist_ok=True)  # left as it is
        assert len(admin.describe_topic("twice").partitions) == 2
        admin.create_topic("fresh", exist_ok=True)
        assert "fresh" in admin.list_topics()
