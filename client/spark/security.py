"""Spark-Kafka security options in the forms Kafka's Java client takes them, translated to
Gregor's client keys (pure: no Spark, no network).

    kafka.sasl.jaas.config = org.apache.kafka.common.security.scram.ScramLoginModule required
                             username="alice" password="secret";
        -> sasl.username, sasl.password (ScramLoginModule needs a SCRAM-SHA-* kafka.sasl.mechanism,
           PlainLoginModule needs PLAIN; shaded class names such as kafkashaded.org.apache...
           are taken too)
    kafka.ssl.truststore.type = PEM with kafka.ssl.truststore.location = FILE   -> ssl.cafile
    kafka.ssl.keystore.type = PEM with kafka.ssl.keystore.location = FILE       -> ssl.certfile
                             (the key in the same file, unencrypted)

Everything else of Kafka's JAAS and keystore families (GSSAPI/Kerberos, OAUTHBEARER, JKS and
PKCS12 stores, store passwords, encrypted keys) is refused with what to give instead; the
client config registry refuses what is left (kafka_keys.py). Any thread may call this.
"""

from __future__ import annotations

import re

from client.errors import ConfigError

_JAAS = re.compile(
    r"^\s*(?P<module>[\w.$]+)\s+(?P<flag>required|requisite|sufficient|optional)"
    r"(?P<options>(?:\s+\w+\s*=\s*(?:\"(?:[^\"\\]|\\.)*\"|[^\s;\"]+))*)\s*;\s*$",
    re.S,
)
_JAAS_OPTION = re.compile(r"(\w+)\s*=\s*(?:\"((?:[^\"\\]|\\.)*)\"|([^\s;\"]+))")
_MODULES = {
    ".security.scram.ScramLoginModule": ("SCRAM-SHA-256", "SCRAM-SHA-512"),
    ".security.plain.PlainLoginModule": ("PLAIN",),
}
_GIVE_INSTEAD = (
    "give kafka.sasl.jaas.config with ScramLoginModule or PlainLoginModule and username/password,"
    " or kafka.sasl.username and kafka.sasl.password"
)
_STORE_HINT = (
    "Gregor reads PEM files only: give kafka.ssl.cafile (trusted CAs), kafka.ssl.certfile and"
    " kafka.ssl.keyfile, or the store as PEM (kafka.ssl.truststore.type=PEM /"
    " kafka.ssl.keystore.type=PEM)"
)
# kafka.X options this module consumes (X as Spark passes them: lower-cased)
HANDLED = frozenset(
    {
        "sasl.jaas.config",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.keystore.type",
        "ssl.keystore.location",
    }
)


def parse_jaas(raw: str) -> tuple[str, dict[str, str]]:
    """`Module required k="v" k2=v2;` -> (module, {k: v}); ConfigError when it is not one
    login module entry in JAAS syntax."""
    m = _JAAS.match(raw)
    if m is None:
        raise ConfigError(
            "option 'kafka.sasl.jaas.config': not a JAAS login module entry"
            " (expected: org.apache.kafka.common.security.scram.ScramLoginModule required"
            ' username="..." password="...";)'
        )
    options = {}
    for k, quoted, bare in _JAAS_OPTION.findall(m["options"]):
        options[k] = re.sub(r"\\(.)", r"\1", quoted) if quoted or not bare else bare
    return m["module"], options


def translate(kafka: dict[str, str]) -> dict[str, str]:
    """The `kafka.*` options (prefix removed, names lower-cased) with the forms above replaced
    by Gregor's keys. ConfigError naming the option for a form Gregor does not take, or for
    settings that disagree."""
    out = {k: v for k, v in kafka.items() if k not in HANDLED}
    if "sasl.jaas.config" in kafka:
        _jaas(kafka["sasl.jaas.config"], kafka, out)
    for store, key in (("truststore", "ssl.cafile"), ("keystore", "ssl.certfile")):
        location = kafka.get(f"ssl.{store}.location")
        kind = kafka.get(f"ssl.{store}.type")
        if location is None:
            if kind is not None and kind.strip().upper() != "PEM":
                raise ConfigError(f"option 'kafka.ssl.{store}.type': {kind!r}: {_STORE_HINT}")
            continue
        if kind is None or kind.strip().upper() != "PEM":
            raise ConfigError(
                f"option 'kafka.ssl.{store}.location': a {kind or 'JKS'} store is not"
                f" supported: {_STORE_HINT}"
            )
        _set(out, key, location, f"kafka.ssl.{store}.location")
    return out


def _set(out: dict[str, str], key: str, value: str, option: str) -> None:
    if key in out and out[key] != value:
        raise ConfigError(f"options '{option}' and 'kafka.{key}' disagree: give one of them")
    out[key] = value


def _jaas(raw: str, kafka: dict[str, str], out: dict[str, str]) -> None:
    module, options = parse_jaas(raw)
    mechanisms = next((v for k, v in _MODULES.items() if module.endswith(k)), None)
    if mechanisms is None:
        raise ConfigError(
            f"option 'kafka.sasl.jaas.config': login module {module} is not supported"
            f" (Gregor has SCRAM-SHA-256, SCRAM-SHA-512 and PLAIN; no Kerberos or OAuth):"
            f" {_GIVE_INSTEAD}"
        )
    mechanism = kafka.get("sasl.mechanism")
    if mechanism is None or mechanism.strip().upper() not in mechanisms:
        raise ConfigError(
            f"option 'kafka.sasl.jaas.config': {module.rsplit('.', 1)[-1]} goes with"
            f" kafka.sasl.mechanism {' or '.join(mechanisms)}, not {mechanism or 'its default'}:"
            " set kafka.sasl.mechanism"
        )
    unknown = sorted(set(options) - {"username", "password"})
    if unknown or "username" not in options or "password" not in options:
        raise ConfigError(
            'option \'kafka.sasl.jaas.config\': takes username="..." and password="..."'
            + (f" (not {', '.join(unknown)})" if unknown else "")
        )
    _set(out, "sasl.username", options["username"], "kafka.sasl.jaas.config")
    _set(out, "sasl.password", options["password"], "kafka.sasl.jaas.config")
