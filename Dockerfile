# Gregor server image.   Build: docker build -t gregor .   Run: docker compose up
# BASE_IMAGE: any Debian-like image with Python 3.11 and pip (users: python:3.11-slim).
ARG BASE_IMAGE=python:3.11-slim

# -- build: wheels of Gregor (with its C extensions) and of its dependencies --------------------
FROM ${BASE_IMAGE} AS build
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# setup.py declares the C extensions (client/records/_speedups.c, _crc.c): without it the wheel
# would be pure Python.
COPY pyproject.toml setup.py README.md ./
COPY client ./client
COPY controller ./controller
COPY broker ./broker
RUN pip wheel --no-cache-dir --wheel-dir /wheels ".[compression]"

# -- run: no compiler, a non-root user ---------------------------------------------------------
FROM ${BASE_IMAGE}
COPY --from=build /wheels /wheels
# The extensions are optional at install time (pip skips one that fails to compile); an image
# without them is ~2x slower, so the build fails instead.
RUN pip install --no-cache-dir --no-index --find-links /wheels "gregor[compression]" \
    && rm -rf /wheels \
    && python -c "import client.records._speedups, client.records._crc; \
import client.records.crc as c; c.require_c_extension(); \
from client.records import reader, builder; \
assert reader.DECODER == 'c' and builder.ENCODER == 'c', (reader.DECODER, builder.ENCODER)"
RUN useradd --system --uid 10001 --user-group --home-dir /var/lib/gregor gregor \
    && mkdir -p /var/lib/gregor && chown gregor:gregor /var/lib/gregor
WORKDIR /opt/gregor
COPY config ./config
USER gregor
VOLUME /var/lib/gregor
EXPOSE 9092
ENTRYPOINT ["gregor"]
CMD ["server", "--config", "config/docker/single-node.yaml"]
