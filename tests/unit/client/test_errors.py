"""The exception classes are written out, one per wire error code (issue 10): checked here
against `ErrorCode` and `RETRIABLE`, so a code added without its class (or a class whose code,
name or retriable flag drifted) fails."""

from __future__ import annotations

import ast
from pathlib import Path

import client.errors as errors
import client.errors_wire as wire
from client.errors import (
    RETRIABLE,
    BrokerResponseError,
    ErrorCode,
    GregorError,
    LocalError,
    error_for_code,
    raise_for_code,
)

SPECIAL = {
    ErrorCode.CORRUPT_MESSAGE: "CorruptRecordError",  # Kafka's name
    ErrorCode.REQUEST_TIMED_OUT: "RequestTimedOutError",
    ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicError",
    ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerError",
    ErrorCode.KAFKA_STORAGE_ERROR: "KafkaStorageError",
}


def _expected_name(code: ErrorCode) -> str:
    return SPECIAL.get(code) or "".join(p.capitalize() for p in code.name.split("_")) + "Error"


def test_every_code_has_one_written_out_class() -> None:
    source = Path(wire.__file__).read_text()
    declared = {n.name for n in ast.walk(ast.parse(source)) if isinstance(n, ast.ClassDef)}
    seen = set()
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        cls = error_for_code(int(code))
        name = _expected_name(code)
        assert cls.__name__ == name, (code, cls.__name__)
        assert name in declared, f"{name} is not a class statement in errors_wire.py"
        assert getattr(errors, name) is cls, f"client.errors does not export {name}"
        assert cls.code is code and issubclass(cls, BrokerResponseError)
        assert cls.retriable is (code in RETRIABLE), code
        seen.add(cls)
    assert len(seen) == len(ErrorCode) - 1  # one class per code, none shared
    assert declared == {c.__name__ for c in seen}  # and no class without a code


def test_unknown_codes_and_raise_for_code() -> None:
    assert error_for_code(31_337) is errors.UnknownServerError
    raise_for_code(0)
    try:
        raise_for_code(int(ErrorCode.NOT_LEADER_OR_FOLLOWER), "t-0")
    except errors.NotLeaderOrFollowerError as exc:
        assert exc.retriable and str(exc) == "[NOT_LEADER_OR_FOLLOWER] t-0"
    else:
        raise AssertionError("raise_for_code raised nothing")


def test_local_errors_are_a_separate_branch() -> None:
    for cls in (
        errors.ConfigError,
        errors.ClientClosedError,
        errors.GregorTimeoutError,
        errors.ConnectionFailedError,
        errors.StorageError,
        errors.MissingCodecError,
    ):
        assert issubclass(cls, LocalError) and issubclass(cls, GregorError)
        assert not issubclass(cls, BrokerResponseError)
    assert issubclass(errors.ConfigError, ValueError)
    assert issubclass(errors.GregorTimeoutError, TimeoutError)
