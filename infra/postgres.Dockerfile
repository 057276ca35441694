# PostgreSQL from Debian's packages, for compose.local.yaml where no image registry is reachable.
# It honours the official postgres image's variables (POSTGRES_USER, POSTGRES_PASSWORD or
# POSTGRES_PASSWORD_FILE, POSTGRES_DB) and data directory, so the override only swaps the image.
#   docker build --build-arg BASE=autopilot/base:bookworm -f infra/postgres.Dockerfile .
ARG BASE=debian:bookworm-slim
FROM ${BASE}
ENV DEBIAN_FRONTEND=noninteractive LANG=C.UTF-8 \
    PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 tini \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p "$PGDATA" /var/run/postgresql \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
COPY infra/postgres-entrypoint.sh /usr/local/bin/postgres-entrypoint.sh
# Starts as root to read the password file, then runs PostgreSQL as the postgres user.
EXPOSE 5432
ENTRYPOINT ["/usr/bin/tini", "--", "/usr/local/bin/postgres-entrypoint.sh"]
