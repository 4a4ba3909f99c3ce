# Gregor server image. Build: docker build -t gregor .   Run: docker compose up
FROM python:3.11-slim
RUN apt-get update && apt-get install -y --no-install-recommends gcc libc6-dev \
    && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/gregor
COPY pyproject.toml README.md ./
COPY client ./client
COPY controller ./controller
COPY broker ./broker
COPY config ./config
RUN pip install --no-cache-dir ".[compression]" \
    && python -c "import client.records.crc as c; c.require_c_extension()"
VOLUME /var/lib/gregor
EXPOSE 9092
ENTRYPOINT ["gregor"]
CMD ["server", "--config", "config/docker/single-node.yaml"]
