"""The dashboard's Queues panel in a real headless Chromium (Debian's), driven by Playwright,
against a real control plane that requires a token: it lists a named queue with its queued
tasks, its Pause and Resume buttons act on the control plane (and the JSON API agrees), a
pause made elsewhere shows live, and action requests without the token or without the
action header are refused.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from chromium import LIVE_TIMEOUT_MS, launched, skip_without_chromium
from harness import Cluster, wait_until
from http_helpers import wait_for_status

TOKEN = "dashboard-queues-test-token-3c1e"
QUEUE = "reports"  # no worker of this test serves it: its tasks stay queued

skip_without_chromium()

from playwright.async_api import Browser, Page  # noqa: E402


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched() as browser:
        yield browser


@pytest.fixture
async def guarded(cluster: Cluster) -> Cluster:
    """A ready control plane requiring TOKEN, its embedded subworker serving the default
    queue only."""
    cluster.control_plane(env=cluster.env(FASTWORKER_AUTH_TOKEN=TOKEN))
    async with cluster.client(auth_token=TOKEN) as client:
        await cluster.workers(client, 1)
    return cluster


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def api_queue(http: aiohttp.ClientSession, base: str, name: str) -> dict[str, Any]:
    async with http.get(
        f"{base}/api/queues", headers={"Authorization": f"Bearer {TOKEN}"}
    ) as response:
        assert response.status == 200
        queues = await response.json()
    return next(q for q in queues if q["name"] == name)


async def wait_for_row(page: Page, queue: str, paused: bool) -> None:
    await page.wait_for_function(
        """([queue, paused]) => {
            const row = document.querySelector(`#queues-table tr[data-queue="${queue}"]`);
            return row !== null && row.dataset.paused === String(paused);
        }""",
        arg=[queue, paused],
        timeout=LIVE_TIMEOUT_MS,
    )


async def test_the_queues_panel_lists_a_queue_and_pauses_and_resumes_it(
    guarded: Cluster, browser: Browser, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    base = guarded.http
    await wait_for_status(http, f"{base}/healthz", 200)
    async with guarded.client(auth_token=TOKEN) as client:
        # Given three tasks queued on a queue no worker serves
        for i in range(3):
            await client.delay("add", i, 1, queue=QUEUE)
        page = await browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(f"{base}/?token={TOKEN}")  # sets the cookie, then drops the token

        # When the page shows the queue
        row = page.locator(f'#queues-table tr[data-queue="{QUEUE}"]')
        await wait_for_row(page, QUEUE, paused=False)

        # Then it lists the queued tasks, no worker, and no limit
        cells = [(await c.text_content() or "").strip() for c in await row.locator("td").all()]
        assert cells[0] == QUEUE
        assert cells[1:5] == ["0", "0", "3", "0"]  # critical, high, normal, low
        assert cells[6:8] == ["0", "0"]  # running, workers
        assert cells[8] == "none"
        assert cells[10] == "active"
        assert "?token" not in page.url

        # When Pause is clicked, the queue is paused, and the API agrees
        button = row.locator("button.queue-action")
        assert (await button.text_content() or "").strip() == "Pause"
        await button.click()
        await wait_for_row(page, QUEUE, paused=True)
        assert (await api_queue(http, base, QUEUE))["paused"] is True
        assert (await button.text_content() or "").strip() == "Resume"
        assert (await row.locator("td").nth(10).text_content() or "").strip() == "paused"

        # When Resume is clicked, it is resumed
        await button.click()
        await wait_for_row(page, QUEUE, paused=False)
        assert (await api_queue(http, base, QUEUE))["paused"] is False

        # And a pause made by another client shows live, without a reload
        navigations: list[str] = []
        page.on("framenavigated", lambda frame: navigations.append(frame.url))
        await client.pause_queue(QUEUE)
        await wait_for_row(page, QUEUE, paused=True)
        await client.resume_queue(QUEUE)
        await wait_for_row(page, QUEUE, paused=False)
        assert navigations == []

        screenshot = tmp_path / "dashboard-queues.png"
        await page.screenshot(path=str(screenshot), full_page=True)
        print(f"dashboard screenshot: {screenshot}")
        assert errors == []

        # The tasks stayed queued throughout
        queue = await api_queue(http, base, QUEUE)
        assert queue["depth"]["normal"] == 3


async def test_a_queue_action_needs_the_token_and_the_action_header(
    guarded: Cluster, http: aiohttp.ClientSession
) -> None:
    base = guarded.http
    await wait_for_status(http, f"{base}/healthz", 200)
    url = f"{base}/api/queues/{QUEUE}/pause"
    bearer = {"Authorization": f"Bearer {TOKEN}"}

    # Without the token: 401, even with the action header
    async with http.post(url, headers={"X-FastWorker-Action": "1"}) as response:
        assert response.status == 401
        assert (await response.json())["error"] == "unauthorized"

    # With the token but without the header (what a cross-site form could send): 403
    async with http.post(url, headers=bearer) as response:
        assert response.status == 403
        assert (await response.json())["error"] == "forbidden"

    # With both, but from another site's page: 403
    evil = {**bearer, "X-FastWorker-Action": "1", "Origin": "http://evil.example"}
    async with http.post(url, headers=evil) as response:
        assert response.status == 403

    async def listed() -> bool:
        async with http.get(f"{base}/api/queues", headers=bearer) as response:
            return response.status == 200 and all(not q["paused"] for q in await response.json())

    await wait_until(listed, 10, "the queue listing")  # nothing was paused

    # With both: obeyed
    async with http.post(url, headers={**bearer, "X-FastWorker-Action": "1"}) as response:
        assert response.status == 200
        assert await response.json() == {"queue": QUEUE, "paused": True, "purged": 0}
    assert (await api_queue(http, base, QUEUE))["paused"] is True
