"""Build hook for the optional C extension; everything else is in pyproject.toml.

client.records._speedups (client/records/_speedups.c) speeds up decoding record sections on the
consumer's path. It is optional: without a compiler the install still succeeds and
client.records.reader uses its pure-Python decoder (as with GREGOR_NO_EXTENSIONS=1).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "client.records._speedups",
            sources=["client/records/_speedups.c"],
            extra_compile_args=["-O2", "-Wall"],
            optional=True,
        )
    ]
)
