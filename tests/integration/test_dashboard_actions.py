"""The dashboard's actions in a real headless Chromium (Debian's), driven by Playwright,
against a real control plane that requires a token: a task that failed for good shows in
the Failed tasks panel with its traceback and arguments; Retry runs it again as a new task
linked to it (from the panel and from the task's details), Retry all matching asks first;
Cancel stops a running task; each action shows in the Activity list. Action requests
without the token, without the action header or from another origin are refused.
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

from fastworker import Client

TOKEN = "dashboard-actions-test-token-7f2a"
BEARER = {"Authorization": f"Bearer {TOKEN}"}

skip_without_chromium()

from playwright.async_api import Browser, Page  # noqa: E402


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched() as browser:
        yield browser


@pytest.fixture
async def guarded(cluster: Cluster) -> Cluster:
    """A ready control plane requiring TOKEN, with its embedded subworker."""
    cluster.control_plane(env=cluster.env(FASTWORKER_AUTH_TOKEN=TOKEN))
    async with cluster.client(auth_token=TOKEN) as client:
        await cluster.workers(client, 1)
    return cluster


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as session:
        yield session


async def api(http: aiohttp.ClientSession, base: str, path: str) -> tuple[int, Any]:
    async with http.get(f"{base}{path}", headers=BEARER) as response:
        return response.status, await response.json()


async def open_dashboard(browser: Browser, base: str, errors: list[str]) -> Page:
    page = await browser.new_page(viewport={"width": 1400, "height": 1200})
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(f"{base}/?token={TOKEN}")  # sets the cookie, then drops the token
    return page


async def failed_for_good(client: Client, message: str) -> str:
    task_id = await client.delay("explode", message)
    result = await client.wait_result(task_id, timeout=20)
    assert result.status == "failure"
    return task_id


async def wait_for_activity(page: Page, kind: str, target: str | None = None) -> None:
    selector = f'#activity-list li[data-kind="{kind}"]'
    if target is not None:
        selector += f'[data-target="{target}"]'
    await page.locator(selector).first.wait_for(state="attached", timeout=LIVE_TIMEOUT_MS)


async def test_a_failed_task_is_listed_retried_from_the_panel_and_its_details(
    guarded: Cluster, browser: Browser, http: aiohttp.ClientSession, tmp_path: Path
) -> None:
    base = guarded.http
    await wait_for_status(http, f"{base}/healthz", 200)
    errors: list[str] = []
    async with guarded.client(auth_token=TOKEN) as client:
        # Given a task that failed for good, and a page on the dashboard
        first = await failed_for_good(client, "boom one")
        page = await open_dashboard(browser, base, errors)

        # Then the Failed tasks panel lists it, and filtering by its name keeps it
        row = page.locator(f'#failed-table tr[data-task-id="{first}"]')
        await row.wait_for(timeout=LIVE_TIMEOUT_MS)
        await page.fill("#failed-task-name", "explode")
        await page.get_by_role("button", name="Apply").click()
        await row.wait_for(timeout=LIVE_TIMEOUT_MS)
        cells = [(await c.text_content() or "").strip() for c in await row.locator("td").all()]
        # filtered by the bare name, shown by the full one
        assert cells[2:6] == ["it_tasks.explode", "RuntimeError", "boom one", "1"]
        await page.fill("#failed-task-name", "add")
        await page.get_by_role("button", name="Apply").click()
        await row.wait_for(state="detached", timeout=LIVE_TIMEOUT_MS)
        await page.fill("#failed-task-name", "")
        await page.get_by_role("button", name="Apply").click()

        # When its row is opened, its traceback and arguments show
        await page.get_by_role("button", name=f"Show failed task {first}").click()
        traceback = page.locator("#failed-traceback")
        await traceback.wait_for(timeout=LIVE_TIMEOUT_MS)
        assert "RuntimeError: boom one" in (await traceback.text_content() or "")
        assert '"boom one"' in (await page.locator("#failed-args").text_content() or "")

        # When Retry is clicked there, the task runs again as a new task linked to it
        await page.get_by_role("button", name=f"Retry failed task {first}").click()
        await wait_for_activity(page, "failed.retry", first)
        await row.wait_for(state="detached", timeout=LIVE_TIMEOUT_MS)
        second = await retry_of(http, base, first)
        assert (await api(http, base, f"/api/tasks/{second}"))[1]["retry_of"] == first

        # And the retry, failing too, is a dead letter: its details offer Retry
        await page.locator(f'#failed-table tr[data-task-id="{second}"]').wait_for(
            timeout=LIVE_TIMEOUT_MS
        )
        await page.click(f'#tasks-table tr[data-task-id="{second}"]')
        retry_of_field = page.locator('#task-detail dd[data-field="retry_of"]')
        await retry_of_field.get_by_role("button").wait_for(timeout=LIVE_TIMEOUT_MS)
        retry = page.get_by_role("button", name=f"Retry task {second}")
        await retry.click()
        await page.locator("#task-retried-as").wait_for(timeout=LIVE_TIMEOUT_MS)
        third = (await page.locator("#task-retried-as").text_content() or "").strip()
        assert (await api(http, base, f"/api/tasks/{third}"))[1]["retry_of"] == second
        await wait_for_activity(page, "failed.retry", second)
        await page.click("#task-detail-close")

        # When one of two is checked, Retry selected retries that one only
        await page.locator(f'#failed-table tr[data-task-id="{third}"]').wait_for(
            timeout=LIVE_TIMEOUT_MS
        )
        other = await failed_for_good(client, "boom two")
        other_row = page.locator(f'#failed-table tr[data-task-id="{other}"]')
        await other_row.wait_for(timeout=LIVE_TIMEOUT_MS)
        await page.get_by_role("checkbox", name=f"Select failed task {other}").check()
        await page.get_by_role("button", name="Retry selected failed tasks").click()
        await wait_for_activity(page, "failed.retry", other)
        await other_row.wait_for(state="detached", timeout=LIVE_TIMEOUT_MS)
        retried_other = await retry_of(http, base, other)
        await page.locator(f'#failed-table tr[data-task-id="{retried_other}"]').wait_for(
            timeout=LIVE_TIMEOUT_MS
        )  # it failed again

        # When Retry all matching is clicked, it asks first, then retries every match
        await page.get_by_role("button", name="Retry all matching failed tasks").click()
        confirm = page.get_by_role("button", name="Confirm retry all matching")
        await confirm.wait_for(timeout=LIVE_TIMEOUT_MS)
        assert (await api(http, base, "/api/failed"))[1]["total"] == 2  # nothing yet
        await confirm.click()
        await wait_for_activity(page, "failed.retry", "")
        retries = [await retry_of(http, base, old) for old in (third, retried_other)]

        # And once those fail again, select all and Purge (confirmed) empties the store
        for task_id in retries:
            await page.locator(f'#failed-table tr[data-task-id="{task_id}"]').wait_for(
                timeout=LIVE_TIMEOUT_MS
            )
        await page.get_by_role("checkbox", name="Select all failed tasks").check()
        purge = page.get_by_role("button", name="Purge failed tasks")
        assert (await purge.text_content() or "").strip() == "Purge selected (2)"
        await purge.click()
        await page.get_by_role("button", name="Confirm purge").click()
        await wait_for_activity(page, "failed.purge")
        await page.locator("#failed-empty").wait_for(state="visible", timeout=LIVE_TIMEOUT_MS)
        assert (await api(http, base, "/api/failed"))[1]["stored"] == 0

        sources = await page.locator("#activity-list li .badge").all_text_contents()
        assert set(sources) == {"http"}
        screenshot = tmp_path / "dashboard-actions.png"
        await page.screenshot(path=str(screenshot), full_page=True)
        print(f"dashboard screenshot: {screenshot}")
        assert errors == []


async def retry_of(http: aiohttp.ClientSession, base: str, task_id: str) -> str:
    """The id of the task that runs dead letter ``task_id`` again, once it is listed."""
    found: list[str] = []

    async def listed() -> bool:
        status, tasks = await api(http, base, "/api/tasks?limit=1000")
        assert status == 200
        found[:] = [t["task_id"] for t in tasks if t["task_id"] != task_id]
        for candidate in found:
            _, detail = await api(http, base, f"/api/tasks/{candidate}")
            if detail.get("retry_of") == task_id:
                found[:] = [candidate]
                return True
        return False

    await wait_until(listed, 20, f"a retry of {task_id}")
    return found[0]


async def test_cancel_in_a_tasks_details_cancels_it_and_shows_in_the_activity(
    guarded: Cluster, browser: Browser, http: aiohttp.ClientSession
) -> None:
    base = guarded.http
    await wait_for_status(http, f"{base}/healthz", 200)
    errors: list[str] = []
    async with guarded.client(auth_token=TOKEN) as client:
        # Given a long task running, and one queued on a queue no worker serves
        running = await client.delay("nap", 60, "long")
        queued = await client.apply_async("add", args=(1, 2), queue="nobody")

        async def started() -> bool:
            result = await client.get_task_result(running)
            return result is not None and result.status == "running"

        await wait_until(started, 20, "the long task to start")
        page = await open_dashboard(browser, base, errors)

        for task_id in (running, queued):
            # When its Cancel button is clicked in its details
            await page.locator(f'#tasks-table tr[data-task-id="{task_id}"]').click()
            cancel = page.get_by_role("button", name=f"Cancel task {task_id}")
            await cancel.click()

            # Then it is cancelled, the details say so, and the Activity list shows it
            await page.wait_for_function(
                "() => document.querySelector('#task-detail-status')?.textContent === 'cancelled'",
                timeout=LIVE_TIMEOUT_MS,
            )
            result = await client.get_task_result(task_id)
            assert result is not None
            assert result.status == "cancelled"
            await wait_for_activity(page, "task.cancel", task_id)
            await page.click("#task-detail-close")
        assert errors == []


async def test_an_action_needs_the_token_the_action_header_and_its_own_origin(
    guarded: Cluster, http: aiohttp.ClientSession
) -> None:
    base = guarded.http
    await wait_for_status(http, f"{base}/healthz", 200)
    async with guarded.client(auth_token=TOKEN) as client:
        queued = await client.apply_async("add", args=(1, 2), queue="nobody")
        dead = await failed_for_good(client, "boom")
        requests = [
            (f"/api/tasks/{queued}/cancel", None),
            ("/api/failed/retry", {"task_ids": [dead]}),
            ("/api/failed/purge", {"task_ids": [dead]}),
        ]
        act = {"X-FastWorker-Action": "1"}
        for path, body in requests:
            url = f"{base}{path}"
            # Without the token: 401, even with the action header
            async with http.post(url, json=body, headers=act) as response:
                assert response.status == 401
                assert (await response.json())["error"] == "unauthorized"
            # With the token but without the header (what a cross-site form sends): 403
            async with http.post(url, json=body, headers=BEARER) as response:
                assert response.status == 403
                assert (await response.json())["error"] == "forbidden"
            # With both, from another site's page: 403
            evil = {**BEARER, **act, "Origin": "http://evil.example"}
            async with http.post(url, json=body, headers=evil) as response:
                assert response.status == 403

        # Nothing changed: the task is still queued, the dead letter still there
        result = await client.get_task_result(queued)
        assert result is not None
        assert result.status == "queued"
        assert (await api(http, base, f"/api/failed/{dead}"))[0] == 200
        assert await api(http, base, "/api/actions") == (200, [])
