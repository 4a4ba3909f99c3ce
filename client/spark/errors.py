"""How the `gregor` source and sink fail: one `GregorSparkError` whose reason is the first line.

PySpark reports an error of a Python data source as the text of the Python traceback inside its
own exception (`AnalysisException: [PYTHON_DATA_SOURCE_ERROR] Failed to ...: Traceback (most
recent call last):`, `PythonException`, `StreamingQueryException: [STREAM_FAILED] ...`), so the
reason would come last, after the traceback. `surfaced()` wraps every entry point Spark calls
(DataSource, readers, writers, on the driver and in tasks) and turns any `GregorError` into a
`GregorSparkError` carrying the same message, raised so that the traceback text *starts* with
the line `client.spark.errors.GregorSparkError: <reason>`: the error is raised with an unraised
copy of itself as its cause, and Python prints a cause without a traceback as that one line,
then "The above exception was the direct cause of the following exception:" and the traceback,
which stays for debugging. PySpark's simplified tracebacks (on by default) set `__cause__ =
None` on the error to drop causes; `GregorSparkError.__cause__` is a property that keeps its
lead line through that (and only that: it holds nothing else). With Spark's
`spark.sql.execution.pyspark.udf.hideTraceback.enabled=true` only the reason line is left.

Other exceptions (bugs) pass through untouched. `reason_of(exc)` finds the reason in the text
of any exception PySpark raised (for scripts that print one line).

Any thread may call these functions.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import Any, NoReturn, TypeVar

from client.errors import GregorError

F = TypeVar("F", bound=Callable[..., Any])

MARKER = "GregorSparkError: "


class GregorSparkError(GregorError):
    """Why a `gregor` read or write failed (bad option, missing topic, data loss, cluster
    unreachable ...). The message is one line that says what and what to do."""

    _lead: GregorSparkError | None = None

    @property
    def __cause__(self) -> BaseException | None:
        return self._lead

    @__cause__.setter
    def __cause__(self, value: BaseException | None) -> None:
        if value is not None:  # PySpark's `e.__cause__ = None` must not drop the lead line
            self._lead = value  # type: ignore[assignment]


def _raise_surfaced(exc: GregorError) -> NoReturn:
    reason = str(exc) or type(exc).__name__
    err = exc if isinstance(exc, GregorSparkError) else GregorSparkError(reason)
    err._lead = GregorSparkError(str(err))  # never raised: formatted first, as one line
    tb = exc.__traceback__
    # from the frame below the wrapper that caught it (the wrapper adds itself again)
    raise err.with_traceback(tb.tb_next if tb is not None else None)


def surfaced(fn: F) -> F:
    """Decorate a method Spark calls: GregorError -> GregorSparkError, reason first."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        caught: GregorError | None = None
        try:
            return fn(*args, **kwargs)
        except GregorError as exc:
            caught = exc
        # raised outside the except block: no implicit context joins the chain
        _raise_surfaced(caught)

    return wrapper  # type: ignore[return-value]


def surfaced_iter(it: Iterator[Any]) -> Iterator[Any]:
    """The same for an iterator a task hands Spark (rows are produced lazily)."""
    caught: GregorError | None = None
    try:
        yield from it
    except GregorError as exc:
        caught = exc
    if caught is not None:
        _raise_surfaced(caught)


def reason_of(exc: BaseException) -> str:
    """The `GregorSparkError: ...` line of an exception PySpark raised, or its first line."""
    text = str(exc)
    for line in text.splitlines():
        i = line.find(MARKER)
        if i >= 0:
            return line[i:].strip()
    return text.splitlines()[0] if text else type(exc).__name__
