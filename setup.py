"""Build hook for the optional C extension; everything else is in pyproject.toml.

client.records._speedups (client/records/_speedups.c) speeds up decoding record sections on the
consumer's path, and packs them on the producer's; client.records._append
(client/records/_append.c) is the sync producer's per-record send() path; client.records._crc (client/records/_crc.c)
computes CRC-32C with SSE4.2 on any buffer, without copying, and checks the batches of a
broker's append; client.protocol._checks (client/protocol/_checks.c) checks Produce and Fetch
answers as client/protocol/fast_checks.py does; broker.kafka._convert
(broker/kafka/_convert.c) converts records sections between Kafka's form and Gregor's for the
Kafka listener. All are optional: without a
compiler the install still succeeds and client.records uses its pure-Python decoder and encoder
and the google-crc32c / crcmod CRC, client.protocol its Python checks (as with
GREGOR_NO_EXTENSIONS=1).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "client.records._speedups",
            sources=["client/records/_speedups.c"],
            extra_compile_args=["-O2", "-Wall"],
            optional=True,
        ),
        Extension(
            "client.records._append",
            sources=["client/records/_append.c"],
            extra_compile_args=["-O2", "-Wall"],
            optional=True,
        ),
        Extension(
            "broker.kafka._convert",
            sources=["broker/kafka/_convert.c"],
            extra_compile_args=["-O2", "-Wall"],
            optional=True,
        ),
        Extension(
            "client.protocol._checks",
            sources=["client/protocol/_checks.c"],
            extra_compile_args=["-O2", "-Wall"],
            optional=True,
        ),
        Extension(
            "client.records._crc",
            sources=["client/records/_crc.c"],
            extra_compile_args=["-O2", "-Wall"],
            optional=True,
        ),
    ]
)
