# Sourced by the other scripts: makes sure uv exists and the workspace is installed.
# Needs only Python 3.11+ on the machine; everything else comes from PyPI via uv.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
if ! command -v uv >/dev/null 2>&1; then
    export PATH="$HOME/.local/bin:$PATH"
    if ! command -v uv >/dev/null 2>&1; then
        echo "bootstrap: installing uv with pip" >&2
        python3 -m pip install --quiet uv 2>/dev/null \
            || python3 -m pip install --quiet --user --break-system-packages uv
    fi
fi
uv sync --locked --quiet

# System packages tests run for real: Prometheus and Chromium (Debian's), nngcat (a
# client no one here wrote, for the protocol's worked example), curl (the HTTP API's
# documented examples) and etcd (Debian's etcd-server 3.4, for leader election).
_missing=()
command -v prometheus >/dev/null 2>&1 || _missing+=(prometheus)
command -v chromium >/dev/null 2>&1 || _missing+=(chromium)
command -v nngcat >/dev/null 2>&1 || _missing+=(nng-utils)
command -v curl >/dev/null 2>&1 || _missing+=(curl)
[ -x /usr/bin/etcd ] || _missing+=(etcd-server)
if ((${#_missing[@]})); then
    if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
        echo "bootstrap: installing ${_missing[*]} with apt-get" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get update -qq >/dev/null
        apt-get install -y -qq "${_missing[@]}" >/dev/null
    else
        echo "bootstrap: ${_missing[*]} missing (install Debian's packages); their tests will skip" >&2
    fi
fi
