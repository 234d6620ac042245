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
