"""Each Kafka translation's `body` annotation names exactly the kio request classes its
registered versions decode to (broker/kafka/kio_requests.py and the unions in apis_txn*.py),
so mypy checks every field a translation reads against every version it serves."""

from __future__ import annotations

import types
import typing
from collections import defaultdict
from collections.abc import Callable

from kio.index import load_request_schema

import broker.kafka  # noqa: F401  (registers every API)
from broker.kafka.apis import APIS


def _classes(hint: object) -> set[type]:
    if isinstance(hint, types.UnionType) or typing.get_origin(hint) is typing.Union:
        return set(typing.get_args(hint))
    assert isinstance(hint, type), hint
    return {hint}


def _served() -> dict[Callable[..., None], set[type]]:
    """Handler -> the kio classes dispatch may hand it (refused versions never reach it)."""
    out: dict[Callable[..., None], set[type]] = defaultdict(set)
    for key, api in APIS.items():
        for version in range(max(api.min_version, api.refused_below), api.max_version + 1):
            out[api.handle].add(load_request_schema(key, version))
    return out


def test_every_translation_names_the_classes_of_its_versions() -> None:
    served = _served()
    assert len(served) >= 40  # every API module registered
    for handle, classes in served.items():
        hint = typing.get_type_hints(handle)["body"]
        assert _classes(hint) == classes, handle.__qualname__


def test_a_missing_version_is_caught() -> None:
    # the check above fails when a union lacks a version the registry serves
    from broker.kafka.kio_requests import MetadataRequest

    served = _served()
    (metadata,) = (h for h in served if h.__name__ == "metadata")
    assert _classes(MetadataRequest) == served[metadata]
    assert _classes(MetadataRequest) - {load_request_schema(3, 12)} != served[metadata]
