"""The shared package imports on its own, without the client, subworker or control plane."""

import subprocess
import sys


def test_the_shared_package_imports_without_the_packages_built_on_it() -> None:
    probe = (
        "import sys, fastworker_common; "
        "built_on = ('fastworker', 'fastworker_subworker', 'fastworker_control_plane'); "
        "print(sorted(m for m in built_on if m in sys.modules))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, check=True, timeout=60
    )

    assert out.stdout.strip() == "[]", out
