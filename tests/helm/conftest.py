"""Fixtures of the chart tests: every value set rendered once, and a stand-in ``fastworker``
for the `helm test` pod's command."""

from __future__ import annotations

from pathlib import Path

import pytest
from chart_render import VALUE_SETS, VIEW_IDS, VIEWS, Rendering, build
from fake_cli import install_fake_fastworker


@pytest.fixture(scope="module")
def renderings() -> dict[str, Rendering]:
    """Every value set, rendered once by real Helm."""
    return {v.id: build(v) for v in VALUE_SETS}


@pytest.fixture(scope="module", params=VIEW_IDS)
def rendering(request: pytest.FixtureRequest, renderings: dict[str, Rendering]) -> Rendering:
    """Each value set, or with subworker.pools each of its pools on its own (a pool_view):
    every test of one subworker holds for every pool."""
    value_set, pool = VIEWS[request.param]
    r = renderings[value_set]
    return r if pool is None else r.pool_view(pool)


@pytest.fixture(scope="module")
def fake_fastworker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the stand-in ``fastworker``, to put first on PATH."""
    return install_fake_fastworker(tmp_path_factory.mktemp("fake-bin"))
