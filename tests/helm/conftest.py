"""Fixtures of the chart tests: every value set rendered once, and a stand-in ``fastworker``
for the `helm test` pod's command."""

from __future__ import annotations

from pathlib import Path

import pytest
from chart_render import IDS, VALUE_SETS, Rendering, build
from fake_cli import install_fake_fastworker


@pytest.fixture(scope="module")
def renderings() -> dict[str, Rendering]:
    """Every value set, rendered once by real Helm."""
    return {v.id: build(v) for v in VALUE_SETS}


@pytest.fixture(scope="module", params=IDS)
def rendering(request: pytest.FixtureRequest, renderings: dict[str, Rendering]) -> Rendering:
    return renderings[request.param]


@pytest.fixture(scope="module")
def fake_fastworker(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding the stand-in ``fastworker``, to put first on PATH."""
    return install_fake_fastworker(tmp_path_factory.mktemp("fake-bin"))
