"""Parsing of every config value type, good and bad."""

from __future__ import annotations

import pytest

from client.config import load_config
from client.config.types import (
    format_duration_ms,
    format_size,
    parse_bool,
    parse_duration_ms,
    parse_enum,
    parse_float,
    parse_int,
    parse_list,
    parse_size,
    parse_str,
)


@pytest.mark.parametrize(
    "raw,want", [(42, 42), ("42", 42), (" -7 ", -7), ("1_000", 1000), (3.0, 3)]
)
def test_int(raw, want):
    assert parse_int(raw) == want


@pytest.mark.parametrize("raw", ["4x", "", "1.5", 1.5, True, None, [1], {"a": 1}])
def test_int_bad(raw):
    with pytest.raises(ValueError, match="an integer"):
        parse_int(raw)


def test_float():
    assert parse_float("0.25") == 0.25 and parse_float(3) == 3.0
    for bad in ("x", True, None, [0.5]):
        with pytest.raises(ValueError, match="a number"):
            parse_float(bad)


@pytest.mark.parametrize("raw", [True, "true", "TRUE", "yes", "on", "1", 1])
def test_bool_true(raw):
    assert parse_bool(raw) is True


@pytest.mark.parametrize("raw", [False, "false", "No", "off", "0", 0])
def test_bool_false(raw):
    assert parse_bool(raw) is False


@pytest.mark.parametrize("raw", ["maybe", 2, None, "", [True]])
def test_bool_bad(raw):
    with pytest.raises(ValueError, match="a boolean"):
        parse_bool(raw)


def test_str():
    assert parse_str("rack-a") == "rack-a" and parse_str(12) == "12"
    for bad in (None, ["a"], {"a": 1}, True):
        with pytest.raises(ValueError, match="a string"):
            parse_str(bad)


def test_list():
    assert parse_list("a, b,,c ") == ("a", "b", "c")
    assert parse_list(["a", "b"]) == ("a", "b")
    assert parse_list([9092]) == ("9092",)
    assert parse_list("") == ()
    for bad in (5, None, [["a"]], [{"a": 1}], [None]):
        with pytest.raises(ValueError, match="list"):
            parse_list(bad)


@pytest.mark.parametrize(
    "raw,want",
    [
        (1024, 1024),
        ("1024", 1024),
        ("1GiB", 1 << 30),
        ("512MiB", 512 << 20),
        ("10KB", 10_000),
        ("10kb", 10_000),
        ("10KiB", 10_240),
        ("5MB", 5_000_000),
        ("100B", 100),
        ("1.5KiB", 1536),
        ("2 GiB", 2 << 30),
        ("-1", -1),
    ],
)
def test_size(raw, want):
    assert parse_size(raw) == want


@pytest.mark.parametrize("raw", ["1GB5", "lots", "10XB", "1.3B", "", None, True, [1], "GiB"])
def test_size_bad(raw):
    with pytest.raises(ValueError, match="a size in bytes"):
        parse_size(raw)


@pytest.mark.parametrize(
    "raw,want",
    [
        (500, 500),
        ("500", 500),
        ("500ms", 500),
        ("10s", 10_000),
        ("1.5s", 1500),
        ("5m", 300_000),
        ("5min", 300_000),
        ("2h", 7_200_000),
        ("7d", 604_800_000),
        ("1w", 604_800_000),
        ("-1", -1),
    ],
)
def test_duration(raw, want):
    assert parse_duration_ms(raw) == want


@pytest.mark.parametrize("raw", ["10 sec", "soon", "1y", "", None, False, "0.5ms"])
def test_duration_bad(raw):
    with pytest.raises(ValueError, match="a duration"):
        parse_duration_ms(raw)


def test_enum():
    choices = ("none", "gzip", "lz4", "zstd")
    assert parse_enum("ZSTD", choices) == "zstd"
    assert parse_enum(1, ("all", "-1", "0", "1")) == "1"
    for bad in ("snappy", None, True, ["gzip"]):
        with pytest.raises(ValueError, match="one of none, gzip, lz4, zstd"):
            parse_enum(bad, choices)


def test_formatting():
    assert format_size(1 << 30) == "1GiB" and format_size(1000) == "1000"
    assert format_duration_ms(604_800_000) == "7d" and format_duration_ms(1500) == "1500ms"


def test_an_enum_choice_yaml_read_as_a_boolean_is_the_choice_meant(tmp_path) -> None:
    """`auto.balance.mode: off` unquoted in a YAML file arrives as False (YAML 1.1)."""
    assert parse_enum(False, ("off", "node-add", "continuous")) == "off"
    with pytest.raises(ValueError, match="one of uniform, range"):
        parse_enum(False, ("uniform", "range"))
    with pytest.raises(ValueError, match="one of off, node-add"):
        parse_enum(True, ("off", "node-add"))
    path = tmp_path / "controller.yaml"
    path.write_text(
        "node.id: 1\nprocess.roles: controller\ncontroller.quorum.voters: 1@127.0.0.1:9093\n"
        f"log.dirs: {tmp_path}\nauto.balance.mode: off\n"
    )
    assert load_config("controller", path, {}).auto_balance_mode == "off"
