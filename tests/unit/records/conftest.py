"""Every records test except test_speedups* runs once per records-section decoder and encoder.

`records_decoder` is "c" (client.records._speedups, skipped when not built or disabled by
GREGOR_NO_EXTENSIONS) or "python" (the reader's and the builder's C hooks switched off for the
module's tests), so CI covers both paths of client.records.reader and .builder without a
second pytest run. Module-scoped (set
and restored around each module's tests), which also keeps hypothesis' function-scoped-fixture
health check quiet.
"""

from __future__ import annotations

import gc
import os
import tracemalloc
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from client.records import builder, reader


@pytest.fixture(scope="module", autouse=True, params=["c", "python"])
def records_decoder(request: pytest.FixtureRequest) -> Iterator[str]:
    saved = reader._c_decode_rows, reader.DECODER, builder._c_encode_rows, builder.ENCODER
    if request.param == "python":
        reader._c_decode_rows, reader.DECODER = None, "python"
        builder._c_encode_rows, builder.ENCODER = None, "python"
    elif reader.DECODER != "c":
        pytest.skip("C decoder not built, or GREGOR_NO_EXTENSIONS set")
    try:
        yield request.param
    finally:
        reader._c_decode_rows, reader.DECODER, builder._c_encode_rows, builder.ENCODER = saved


@pytest.fixture(scope="module")
def speedups() -> Any:
    """The C extension module client.records._speedups; skips the test when it is not built
    or GREGOR_NO_EXTENSIONS is set (module-scoped: hypothesis tests take it too)."""
    if os.environ.get("GREGOR_NO_EXTENSIONS", "") not in ("", "0"):
        pytest.skip("GREGOR_NO_EXTENSIONS is set")
    return pytest.importorskip(
        "client.records._speedups", reason="C extension not built (no compiler at install?)"
    )


@pytest.fixture(scope="module")
def crc_hw() -> Any:
    """The C extension module client.records._crc with its SSE4.2 path; skips the test when
    it is not built, GREGOR_NO_EXTENSIONS is set or the CPU has no SSE4.2 (module-scoped:
    hypothesis tests take it too)."""
    if os.environ.get("GREGOR_NO_EXTENSIONS", "") not in ("", "0"):
        pytest.skip("GREGOR_NO_EXTENSIONS is set")
    mod = pytest.importorskip("client.records._crc", reason="C extension not built")
    if not mod.HARDWARE:
        pytest.skip("no SSE4.2 on this CPU")
    return mod


def _bytes_kept(run: Callable[[int], None], n: int = 10_000) -> int:
    """Bytes of Python allocations still alive after run(n) (run(200) first, to warm caches):
    a leaked object per call shows as >= n blocks."""
    run(200)
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.get_traced_memory()[0]
        run(n)
        gc.collect()
        return tracemalloc.get_traced_memory()[0] - start
    finally:
        tracemalloc.stop()


@pytest.fixture(scope="module")
def bytes_kept() -> Callable[..., int]:
    """_bytes_kept, for the C extension leak tests."""
    return _bytes_kept
