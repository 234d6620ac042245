"""The dashboard's workflow view in a real headless Chromium (Debian's), driven by
Playwright, against a real control plane that ran the workflows: entering a workflow id
draws its steps as a layered graph (boxes coloured by state, an arrow per ``after``), a
step's task details lead to its workflow, the address ``#workflow=<id>`` opens one, and
an unknown id says so. ``GET /api/workflows/{id}`` answers what the graph is drawn from.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from chromium import LIVE_TIMEOUT_MS, launched, skip_without_chromium
from http_helpers import get_json
from it_tasks import add, explode, tsum

from fastworker import Client, chord
from fastworker_protocol.workflows import WorkflowState

skip_without_chromium()

from playwright.async_api import Browser, Page  # noqa: E402

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched() as browser:
        yield browser


async def open_dashboard(browser: Browser, url: str, errors: list[str]) -> Page:
    page = await browser.new_page(viewport={"width": 1400, "height": 1000})
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(url)
    return page


async def drawn(page: Page, workflow_id: str, steps: int) -> dict[str, str]:
    """Wait until ``workflow_id``'s graph shows ``steps`` boxes, none still running;
    each step's state by index."""
    await page.wait_for_function(
        """([id, n]) => {
            const boxes = document.querySelectorAll('#workflow-graph .wf-step');
            return document.getElementById('workflow-title').textContent === id
                && boxes.length === n
                && document.getElementById('workflow-state').textContent !== 'running';
        }""",
        arg=[workflow_id, steps],
        timeout=LIVE_TIMEOUT_MS,
    )
    found: dict[str, str] = await page.eval_on_selector_all(
        "#workflow-graph .wf-step",
        "boxes => Object.fromEntries(boxes.map(b => [b.dataset.index, b.dataset.state]))",
    )
    return found


async def box_x(page: Page, index: int) -> float:
    x: float = await page.eval_on_selector(
        f'#workflow-graph .wf-step[data-index="{index}"]',
        "b => b.transform.baseVal.consolidate().matrix.e",
    )
    return x


async def stroke(page: Page, index: int) -> str:
    colour: str = await page.eval_on_selector(
        f'#workflow-graph .wf-step[data-index="{index}"] rect',
        "r => getComputedStyle(r).stroke",
    )
    return colour


async def test_an_entered_workflow_id_draws_a_chord_as_a_layered_graph(
    client: Client, api: str, browser: Browser, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    # Given a chord of two adds into a sum, run to the end
    workflow_id = await client.submit_workflow(chord([add.s(1, 1), add.s(2, 2)], tsum.s()))
    assert (await client.wait_workflow(workflow_id, 30)).state is WorkflowState.SUCCESS
    status, document = await get_json(http, f"{api}/api/workflows/{workflow_id}")
    assert status == 200
    assert [s["after"] for s in document["steps"]] == [[], [], [0, 1]]

    # When its id is entered in the dashboard
    errors: list[str] = []
    page = await open_dashboard(browser, api + "/", errors)
    await page.fill("#workflow-id", workflow_id)
    await page.click("#workflow-show")

    # Then three green boxes are drawn, the sum a column right of its two parents,
    # with an arrow from each parent to it
    assert await drawn(page, workflow_id, 3) == {"0": "success", "1": "success", "2": "success"}
    assert await page.text_content("#workflow-state") == "success"
    assert await box_x(page, 0) == await box_x(page, 1) < await box_x(page, 2)
    edges = await page.eval_on_selector_all(
        "#workflow-graph .wf-edge", "es => es.map(e => [e.dataset.from, e.dataset.to])"
    )
    assert sorted(edges) == [["0", "2"], ["1", "2"]]
    assert "#workflow=" + workflow_id in page.url

    screenshot = tmp_path / "dashboard-workflow.png"
    await page.screenshot(path=str(screenshot), full_page=True)
    print(f"dashboard screenshot: {screenshot}")
    assert errors == []


async def test_a_steps_task_leads_to_its_workflow_coloured_by_state(
    client: Client, api: str, browser: Browser
) -> None:
    # Given a chain whose first step fails, so its second never runs
    workflow_id = await client.submit_workflow(explode.s("boom") | add.s(1))
    assert (await client.wait_workflow(workflow_id, 30)).state is WorkflowState.FAILURE

    # When the failed step's task details are opened, and its workflow chosen there
    errors: list[str] = []
    page = await open_dashboard(browser, api + "/", errors)
    await page.evaluate("id => window.fastworkerDashboard.openDetail(id)", f"{workflow_id}.0")
    await page.click("#task-detail-workflow", timeout=LIVE_TIMEOUT_MS)

    # Then the workflow is drawn: the failed step red, the skipped one in another colour
    assert await drawn(page, workflow_id, 2) == {"0": "failure", "1": "skipped"}
    assert await page.text_content("#workflow-state") == "failure"
    assert not await page.locator("#task-detail").is_visible()
    assert await stroke(page, 0) != await stroke(page, 1)

    # And clicking a step's box opens its task's details
    await page.click('#workflow-graph .wf-step[data-index="0"]')
    await page.locator("#task-detail-status").wait_for(timeout=LIVE_TIMEOUT_MS)
    assert await page.text_content("#task-detail-status") == "failure"
    assert errors == []


async def test_the_address_opens_a_workflow_and_an_unknown_one_is_said_so(
    client: Client, api: str, browser: Browser
) -> None:
    # Given a finished chain of two
    workflow_id = await client.submit_workflow(add.s(1, 2) | add.s(3))
    await client.wait_workflow(workflow_id, 30)

    # When the dashboard is opened at #workflow=<id>
    errors: list[str] = []
    page = await open_dashboard(browser, f"{api}/#workflow={workflow_id}", errors)

    # Then it is drawn at once
    assert await drawn(page, workflow_id, 2) == {"0": "success", "1": "success"}

    # And an id the control plane does not know hides the graph and says so
    await page.fill("#workflow-id", "no-such-workflow")
    await page.click("#workflow-show")
    await page.wait_for_function(
        "document.getElementById('workflow-message').textContent.includes('No workflow')",
        timeout=LIVE_TIMEOUT_MS,
    )
    assert await page.locator("#workflow-view").is_hidden()
    assert errors == []
