# FastWorker images: one file, two targets.
#
#   docker build --target control-plane -t fastworker-control-plane .
#   docker build --target subworker     -t fastworker-subworker .
#
# BASE_IMAGE is any Debian-like image with Python 3.11+, python3-venv and CA certificates:
# the official slim image by default, or one built from Debian packages where no registry
# can be reached (deploy/build-base-image.sh).
ARG BASE_IMAGE=python:3.11-slim-bookworm

# --- builder: resolve the locked dependencies into one virtualenv with uv ----------------
FROM ${BASE_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON=python3 \
    UV_PYTHON_DOWNLOADS=never \
    UV_PROJECT_ENVIRONMENT=/opt/fastworker
# uv and dumb-init (the init that forwards SIGTERM) both come from PyPI as static binaries;
# pip goes into the virtualenv so images built FROM these can add packages.
RUN python3 -m venv /opt/tools \
    && /opt/tools/bin/pip install --quiet "uv>=0.8,<0.14"
WORKDIR /src
# Dependencies first, so code changes do not re-download them.
COPY pyproject.toml uv.lock ./
COPY services/protocol/pyproject.toml services/protocol/
COPY services/common/pyproject.toml services/common/
COPY services/client_sdk/pyproject.toml services/client_sdk/
COPY services/subworker/pyproject.toml services/subworker/
COPY services/control_plane/pyproject.toml services/control_plane/
RUN /opt/tools/bin/uv sync --locked --no-dev --no-install-workspace
COPY services services
RUN /opt/tools/bin/uv sync --locked --no-dev --no-editable \
    && /opt/tools/bin/uv pip install --python /opt/fastworker/bin/python \
        "dumb-init==1.2.5.post1" "pip>=24,<26"

# --- runtime: the virtualenv and nothing else ----------------------------------------------
FROM ${BASE_IMAGE} AS runtime
ARG UID=10001
RUN groupadd --system --gid "${UID}" fastworker \
    && useradd --system --uid "${UID}" --gid fastworker --home-dir /app --no-create-home fastworker \
    && mkdir -p /app/tasks \
    && chown -R fastworker:fastworker /app
COPY --from=builder /opt/fastworker /opt/fastworker
ENV PATH=/opt/fastworker/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONPATH=/app/tasks
WORKDIR /app
USER ${UID}:${UID}

# --- the control plane ------------------------------------------------------------------------
FROM runtime AS control-plane
ARG UID=10001
# The state dir for --state-dir (FASTWORKER_STATE_DIR): created here, owned by the runtime
# user, so a named Docker volume mounted on it starts out writable (Docker copies the
# ownership of the image's directory into an empty volume). Unused without the flag.
USER root
RUN install -d -m 0750 -o "${UID}" -g "${UID}" /var/lib/fastworker
USER ${UID}:${UID}
ENV FASTWORKER_HOST=0.0.0.0
EXPOSE 5550 5555 5556 5557 5558 5559 5560 8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=20s --retries=3 \
    CMD ["fastworker-control-plane", "--check"]
ENTRYPOINT ["dumb-init", "--", "fastworker-control-plane"]

# --- a subworker --------------------------------------------------------------------------
FROM runtime AS subworker
ENV FASTWORKER_METRICS_HOST=0.0.0.0 \
    FASTWORKER_METRICS_PORT=9100
EXPOSE 9100
HEALTHCHECK --interval=5s --timeout=3s --start-period=20s --retries=3 \
    CMD ["fastworker-subworker", "--check"]
ENTRYPOINT ["dumb-init", "--", "fastworker-subworker"]
