"""The dashboard in a real headless Chromium (Debian's), driven by Playwright: it shows the
subworkers, follows a workload live over Server-Sent Events without reloading, and opens
a failed task's traceback. A screenshot of the final page is saved with the test output.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from chromium import LIVE_TIMEOUT_MS, launched, skip_without_chromium
from harness import Cluster

skip_without_chromium()

from playwright.async_api import Browser, Page, Route  # noqa: E402


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched() as browser:
        yield browser


async def number_in(page: Page, selector: str) -> int:
    text = await page.text_content(selector) or ""
    digits = "".join(ch for ch in text if ch.isdigit())
    return int(digits or 0)


async def wait_for_number(page: Page, selector: str, expected: int) -> None:
    await page.wait_for_function(
        """([selector, expected]) => {
            const el = document.querySelector(selector);
            return el !== null && Number(el.textContent.replace(/[^0-9]/g, "")) === expected;
        }""",
        arg=[selector, expected],
        timeout=LIVE_TIMEOUT_MS,
    )


async def test_the_dashboard_follows_a_workload_live_and_shows_a_failed_tasks_traceback(
    cluster: Cluster, browser: Browser, tmp_path: Path
) -> None:
    cluster.control_plane(local_concurrency=0)
    cluster.subworker()
    cluster.subworker()
    async with cluster.client() as client:
        await cluster.workers(client, 2)
        page = await browser.new_page(viewport={"width": 1400, "height": 1000})
        errors: list[str] = []
        page.on("pageerror", lambda exc: errors.append(str(exc)))
        await page.goto(cluster.http + "/")

        # Given the page shows both subworkers and no tasks yet
        await page.wait_for_function(
            "document.querySelectorAll('#workers-table tr[data-worker-id]').length === 2",
            timeout=LIVE_TIMEOUT_MS,
        )
        assert await number_in(page, "#count-submitted") == 0
        navigations = []
        page.on("framenavigated", lambda frame: navigations.append(frame.url))

        # When 100 tasks run, 5 of which fail
        ids = [await client.delay("add", i, 1) for i in range(95)]
        failed_ids = [await client.delay("explode", f"boom {i}") for i in range(5)]
        results = await client.wait_results(ids + failed_ids, timeout=30)
        assert [r.status for r in results].count("failure") == 5  # type: ignore[arg-type]

        # Then the counts and the recent-task list change live, without a reload
        await wait_for_number(page, "#count-submitted", 100)
        await wait_for_number(page, "#count-succeeded", 95)
        await wait_for_number(page, "#count-failed", 5)
        await page.wait_for_function(
            """(ids) => ids.every(id => {
                const row = document.querySelector(`#tasks-table tr[data-task-id="${id}"]`);
                return row !== null && row.dataset.status === "failure";
            })""",
            arg=failed_ids,
            timeout=LIVE_TIMEOUT_MS,
        )
        successes = await page.locator('#tasks-table tr[data-status="success"]').count()
        assert successes >= 50  # the list keeps the most recent tasks
        assert navigations == []

        # And a failed task opens with its traceback
        await page.click(f'#tasks-table tr[data-task-id="{failed_ids[0]}"]')
        detail = page.locator("#task-detail")
        await detail.wait_for(state="visible", timeout=LIVE_TIMEOUT_MS)
        traceback = page.locator("#task-traceback")
        await traceback.wait_for(state="visible", timeout=LIVE_TIMEOUT_MS)
        text = await traceback.text_content() or ""
        assert "RuntimeError: boom 0" in text
        assert "Traceback (most recent call last)" in text
        # (a finished task's arguments are not kept: the page says so)
        arguments = await page.locator("#task-args").text_content() or ""
        assert arguments.startswith("Not kept"), arguments

        screenshot = tmp_path / "dashboard.png"
        await page.screenshot(path=str(screenshot), full_page=True)
        print(f"dashboard screenshot: {screenshot}")
        assert screenshot.stat().st_size > 10_000
        await page.click("#task-detail-close")
        await detail.wait_for(state="hidden", timeout=LIVE_TIMEOUT_MS)
        assert errors == []


async def test_tasks_that_finished_before_the_live_stream_connected_still_show(
    cluster: Cluster, browser: Browser
) -> None:
    cluster.control_plane(local_concurrency=0)
    cluster.subworker()
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        page = await browser.new_page()
        # Given a page whose event stream connects only after a workload ran (a slow
        # connection), and whose task list was loaded before the workload began
        stream_may_connect = asyncio.Event()

        async def hold_the_stream(route: Route) -> None:
            await stream_may_connect.wait()
            await route.continue_()

        await page.route("**/api/events", hold_the_stream)
        async with page.expect_response(lambda r: "/api/tasks?" in r.url) as listed:
            await page.goto(cluster.http + "/")
        assert await (await listed.value).json() == []

        # When tasks succeed and fail before the stream connects
        succeeded = [await client.delay("add", i, 1) for i in range(3)]
        failed = await client.delay("explode", "early")
        await client.wait_results([*succeeded, failed], timeout=30)
        stream_may_connect.set()

        # Then once it connects, the page lists them in their final states
        await page.wait_for_function(
            """([succeeded, failed]) => {
                const status = (id) => document.querySelector(
                    `#tasks-table tr[data-task-id="${id}"]`)?.dataset.status;
                return succeeded.every(id => status(id) === "success")
                    && status(failed) === "failure";
            }""",
            arg=[succeeded, failed],
            timeout=LIVE_TIMEOUT_MS,
        )
        await wait_for_number(page, "#count-failed", 1)
