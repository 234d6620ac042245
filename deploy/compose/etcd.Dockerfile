# etcd for compose.ha.yaml (the control planes' leader election): Debian's etcd-server
# package (etcd 3.4) on the same base as FastWorker's images, so nothing is pulled beyond
# that base (deploy/build-base-image.sh makes one from Debian's packages).
#
# A single member, for a local cluster: its data on /var/lib/etcd (give it a volume, so
# that revisions, which the control planes' terms are numbered by, never start again
# under control planes that remember a later term). Settings are etcd's own ETCD_*
# variables; override any of them in the environment.
ARG BASE_IMAGE=python:3.11-slim-bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends etcd-server \
    && rm -rf /var/lib/apt/lists/* \
    && install -d -m 0700 -o etcd -g etcd /var/lib/etcd
ENV ETCD_NAME=etcd \
    ETCD_DATA_DIR=/var/lib/etcd/data \
    ETCD_LISTEN_CLIENT_URLS=http://0.0.0.0:2379 \
    ETCD_ADVERTISE_CLIENT_URLS=http://etcd:2379 \
    ETCD_LISTEN_PEER_URLS=http://127.0.0.1:2380 \
    ETCD_INITIAL_ADVERTISE_PEER_URLS=http://127.0.0.1:2380 \
    ETCD_INITIAL_CLUSTER=etcd=http://127.0.0.1:2380 \
    ETCD_LOG_LEVEL=warn
USER etcd
EXPOSE 2379
# Healthy once etcd answers its own /health with "true" (python3 is in every base image).
HEALTHCHECK --interval=2s --timeout=3s --start-period=10s --retries=5 \
    CMD ["python3", "-c", "import sys, urllib.request as u; sys.exit(b'\"true\"' not in u.urlopen('http://127.0.0.1:2379/health', timeout=2).read())"]
ENTRYPOINT ["/usr/bin/etcd"]
