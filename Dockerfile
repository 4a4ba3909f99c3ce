# Gregor server image (docs/docker.md).
#   Users:            docker build -t gregor:dev .        (or: docker compose build)
#   No registry here: scripts/docker/build.sh             (local base image + wheels built on the host)
# BASE_IMAGE: a Debian-like image with Python 3.11 and its venv module (users: python:3.11-slim;
#   without a registry: gregor-base:bookworm from scripts/docker/base-image.sh).
# WHEELHOUSE: a directory of the build context. Empty (the default, scripts/docker/no-wheels):
#   the build stage compiles Gregor's wheel (with its C extensions) and fetches its dependencies'
#   wheels, which needs apt and PyPI. Holding wheels (scripts/docker/build.sh puts them in
#   .docker-wheels/): those are installed as they are, nothing is fetched.
ARG BASE_IMAGE=python:3.11-slim

# -- build: the wheels of Gregor and of its dependencies ----------------------------------------
# Few instructions: the classic builder runs and commits a container for each (2-3 s apiece on
# a fuse-overlayfs engine), so the context goes in with one COPY and the venv is made in one RUN.
FROM ${BASE_IMAGE} AS build
# (the classic builder keeps this stage as an untagged image: scripts/docker/build.sh removes it)
LABEL org.gregor.stage=build
ARG WHEELHOUSE=scripts/docker/no-wheels
# The context (.dockerignore): pyproject.toml, setup.py (it declares the C extensions,
# client/records/_speedups.c, _crc.c, _append.c, client/protocol/_checks.c and
# broker/kafka/_convert.c: without it the wheel would be pure Python), README.md, client/,
# controller/, broker/, config/, the wheelhouse.
COPY . /src/
# A venv works the same on both bases (Debian's python3 refuses system-wide pip installs). It is
# built here and copied whole with the config, so neither the wheels nor pip and setuptools
# reach the image.
RUN cd /src \
    && if ls "$WHEELHOUSE"/gregor-*.whl >/dev/null 2>&1; then \
        echo "prebuilt wheels:" && ls "$WHEELHOUSE" && wheels="/src/$WHEELHOUSE"; \
    else \
        apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
        && rm -rf /var/lib/apt/lists/* \
        && python3 -m pip wheel --no-cache-dir --wheel-dir /wheels ".[compression]" \
        && wheels=/wheels; \
    fi \
    && python3 -m venv /opt/gregor/venv \
    && /opt/gregor/venv/bin/python -m pip install -q --no-cache-dir --no-index \
        --disable-pip-version-check --find-links "$wheels" "gregor[compression]" \
    && /opt/gregor/venv/bin/python -m pip uninstall -q -y pip setuptools \
    && cp -r /src/config /opt/gregor/config

# -- run: no compiler, no pip in the venv, a non-root user ---------------------------------------
FROM ${BASE_IMAGE}
ENV VIRTUAL_ENV=/opt/gregor/venv PATH=/opt/gregor/venv/bin:$PATH PYTHONUNBUFFERED=1
COPY --from=build /opt/gregor /opt/gregor
# The extensions are optional at install time (pip skips one that fails to compile); an image
# without them is ~2x slower, so the build fails instead.
RUN python -c "import client.records._speedups, client.records._crc, client.records._append, broker.kafka._convert; \
import client.protocol._checks; \
import client.records.crc as c; c.require_c_extension(); \
from client.records import reader, builder; \
assert reader.DECODER == 'c' and builder.ENCODER == 'c', (reader.DECODER, builder.ENCODER)" \
    && gregor --version \
    && useradd --system --uid 10001 --user-group --home-dir /var/lib/gregor gregor \
    && mkdir -p /var/lib/gregor && chown gregor:gregor /var/lib/gregor
WORKDIR /opt/gregor
USER gregor
VOLUME /var/lib/gregor
EXPOSE 9092 19092 9093 9404
ENTRYPOINT ["gregor"]
CMD ["server", "--config", "config/docker/single-node.yaml"]
