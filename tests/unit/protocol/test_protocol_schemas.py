"""Every registered schema: encode -> frame -> decode -> check gives back the same body;
omitted optional fields come back as their defaults; garbage bodies raise only
InvalidRequestError."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from strategies import for_type, msgpack_values

from client.errors import InvalidRequestError
from client.protocol import (
    API_SPECS,
    FrameDecoder,
    decode_request,
    decode_response,
    encode_request,
    encode_response,
)
from client.protocol.api_keys import ApiKey
from client.protocol.schema import Struct

SPECS = sorted(API_SPECS.values(), key=lambda s: s.key)
IDS = [s.name for s in SPECS]
FAST = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _roundtrip_request(key: int, version: int, corr: int, body: dict) -> dict:
    (payload,) = FrameDecoder().feed(encode_request(key, version, corr, "cid", body))
    k, v, c, cid, decoded = decode_request(payload)
    assert (k, v, c, cid) == (key, version, corr, "cid")
    return API_SPECS[key].check_request(decoded, version)


def _roundtrip_response(key: int, version: int, corr: int, body: dict) -> dict:
    (payload,) = FrameDecoder().feed(encode_response(corr, body))
    c, decoded = decode_response(payload)
    assert c == corr
    return API_SPECS[key].check_response(decoded, version)


def test_every_contract_api_is_registered() -> None:
    for key in (
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.METADATA,
        ApiKey.API_VERSIONS,
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.DESCRIBE_CLUSTER,
    ):
        assert key in API_SPECS


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_request_and_response_round_trip(spec) -> None:
    @FAST
    @given(
        req=for_type(spec.request, spec.max_version),
        resp=for_type(spec.response, spec.max_version),
        corr=st.integers(0, 2**31 - 1),
    )
    def check(req: dict, resp: dict, corr: int) -> None:
        assert _roundtrip_request(spec.key, spec.max_version, corr, req) == req
        assert _roundtrip_response(spec.key, spec.max_version, corr, resp) == resp

    check()


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_omitted_optional_fields_get_defaults(spec) -> None:
    @FAST
    @given(req=for_type(spec.request, spec.max_version, full=False))
    def check(req: dict) -> None:
        out = _roundtrip_request(spec.key, spec.max_version, 1, req)
        for f in spec.request.fields:
            assert f.name in out
            if f.name not in req:
                d = f.default
                assert out[f.name] == (d() if callable(d) else d)

    check()


@pytest.mark.parametrize("spec", SPECS, ids=IDS)
def test_garbage_bodies_raise_only_invalid_request(spec) -> None:
    @FAST
    @given(body=msgpack_values)
    def check(body) -> None:
        for struct in (spec.request, spec.response):
            try:
                out = struct.check(body, spec.max_version, "")
            except InvalidRequestError:
                continue
            assert isinstance(out, dict)

    check()


def _request_fields(spec) -> list:
    return [f for f in spec.request.fields if f.since <= spec.max_version]


WITH_FIELDS = [s for s in SPECS if _request_fields(s)]  # ApiVersions & co. have empty bodies


@pytest.mark.parametrize("spec", WITH_FIELDS, ids=[s.name for s in WITH_FIELDS])
def test_mutated_valid_bodies_name_the_bad_path(spec) -> None:
    """Replace one top-level field of a valid request with a wrong-typed value: the error names it."""
    fields = _request_fields(spec)

    @FAST
    @given(req=for_type(spec.request, spec.max_version), which=st.sampled_from(fields))
    def check(req: dict, which) -> None:
        bad = dict(req)
        bad[which.name] = {"not": "valid"}  # no field type accepts a map except a Struct
        if isinstance(which.type, Struct):
            bad[which.name] = 3
        with pytest.raises(InvalidRequestError, match=which.name):
            spec.check_request(bad, spec.max_version)

    check()


def test_missing_required_field_is_named() -> None:
    spec = API_SPECS[ApiKey.PRODUCE]
    body = {"topics": [{"name": "t", "partitions": [{"partition": 0}]}]}
    with pytest.raises(InvalidRequestError, match=r"topics\[0\]\.partitions\[0\]\.records"):
        spec.check_request(body, 0)


def test_out_of_range_integer_is_refused() -> None:
    spec = API_SPECS[ApiKey.PRODUCE]
    with pytest.raises(InvalidRequestError, match="acks"):
        spec.check_request({"acks": 2**20, "topics": []}, 0)
