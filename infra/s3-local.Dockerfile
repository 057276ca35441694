# An S3-compatible server from the Python registry (moto's server, the version the tests pin),
# for compose.local.yaml where MinIO's image cannot be pulled. It keeps objects in memory: a
# local stand-in, not a store for real archives.
#   docker build --build-arg BASE=autopilot/base:bookworm -f infra/s3-local.Dockerfile .
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 PYTHONDONTWRITEBYTECODE=1
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 python3-venv ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && python3 -m venv /opt/moto \
 && /opt/moto/bin/pip install --no-cache-dir --disable-pip-version-check "moto[server]==5.2.5" \
 && useradd --uid 10002 moto
USER moto
EXPOSE 9000
ENTRYPOINT ["/usr/bin/tini", "--"]
CMD ["/opt/moto/bin/moto_server", "-H", "0.0.0.0", "-p", "9000"]
