"""What the tests of guides that run "as written" share: README's install in an
application directory holding the guide's titled files, and the guide's command lines."""

from __future__ import annotations

import shlex
from pathlib import Path

from test_install import (
    INSTALL_TIMEOUT,
    Installed,
    bash_blocks,
    copy_checkout,
    outside_env,
    run,
    section,
    titled_blocks,
)


def install_beside_guide(tmp: Path, guide: Path) -> Installed:
    """README's "Your own tasks" install, from a copy of the checkout in ``tmp``, in an
    application directory holding the guide's ``python title="NAME"`` files."""
    where = Installed(tmp / "fastworker", tmp / "myapp")
    copy_checkout(where.checkout)
    where.app.mkdir()
    for name, text in titled_blocks(guide.read_text(encoding="utf-8")).items():
        (where.app / name).write_text(text, encoding="utf-8")
    install = bash_blocks(section("Your own tasks"))[0]
    script = "set -euo pipefail\n" + where.substitute(install)
    run(["bash", "-c", script], tmp, outside_env(), timeout=INSTALL_TIMEOUT)
    return where


def guide_lines(guide: Path) -> list[str]:
    """Every command line of the guide's shell blocks, in order (comment lines left out)."""
    blocks = bash_blocks(guide.read_text(encoding="utf-8"))
    return [line for block in blocks for line in block.splitlines() if shlex.split(line, True)]
