"""How the suite is spread over pytest-xdist's workers.

Each test module runs whole on one worker, so a module-scoped fixture (a control plane, an
install, a rendered chart) is set up once, as without xdist. The modules that drive the
Docker engine form one unit: they build the images once, and two image builds or Compose
clusters never compete for the same two cores. Units go out longest first (Docker, then
real processes, then the rest), so no long one starts last.
"""

from __future__ import annotations

import signal
from pathlib import PurePosixPath
from typing import Any

import pytest

DOCKER_MODULES = frozenset(
    {"test_containers.py", "test_compose_ha.py", "test_helm_in_docker.py", "test_examples.py"}
)


def pytest_configure(config: pytest.Config) -> None:
    """Processes the tests start get SIGINT as from a terminal. Tests stop many of them with
    Ctrl-C's signal; started as a background job of a non-interactive shell, the suite
    (xdist's workers included) has SIGINT ignored, which every process it starts would
    inherit. A handler, unlike an ignored signal, is reset to the default by exec."""
    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


def _module(nodeid: str) -> PurePosixPath:
    return PurePosixPath(nodeid.split("::", 1)[0])


def _unit(nodeid: str) -> str:
    module = _module(nodeid)
    return "docker" if module.name in DOCKER_MODULES else str(module)


def _weight(item: pytest.Item) -> int:
    module = _module(item.nodeid)
    if module.name in DOCKER_MODULES:
        return 0
    return 1 if "integration" in module.parts else 2


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=_weight)  # stable: within a weight, the order of collection


@pytest.hookimpl(optionalhook=True)  # xdist's hook: absent when it is not installed
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class ModuleScheduling(LoadScopeScheduling):  # type: ignore[misc]  # untyped base
        def _split_scope(self, nodeid: str) -> str:
            return _unit(nodeid)

    return ModuleScheduling(config, log)
