"""How the suite is spread over pytest-xdist's workers (``--dist loadgroup``).

Each test module runs whole on one worker, so a module-scoped fixture (a control plane, an
install, a rendered chart) is set up once, as without xdist. The modules that drive the
Docker engine share one group: they build the images once, and two image builds or Compose
clusters never compete for the same two cores.
"""

from __future__ import annotations

from pathlib import Path

import pytest

DOCKER_MODULES = frozenset(
    {"test_containers.py", "test_compose_ha.py", "test_helm_in_docker.py", "test_examples.py"}
)


def _weight(item: pytest.Item) -> int:
    """Longest first, so no long group starts last: Docker, then real processes, then the
    rest (xdist hands out groups in collection order)."""
    module = Path(item.nodeid.split("::", 1)[0])
    if module.name in DOCKER_MODULES:
        return 0
    return 1 if "integration" in module.parts else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_weight)  # stable: within a weight, the order of collection
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        module = Path(item.nodeid.split("::", 1)[0])
        group = "docker" if module.name in DOCKER_MODULES else module.as_posix()
        item.add_marker(pytest.mark.xdist_group(group))
