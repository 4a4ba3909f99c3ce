from __future__ import annotations

from collections.abc import Iterator

import pytest
from fake_broker import FakeBroker


@pytest.fixture
def fake_broker() -> Iterator[FakeBroker]:
    b = FakeBroker()
    yield b
    b.stop()
