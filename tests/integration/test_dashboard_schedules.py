"""The dashboard's Schedules panel in headless Chromium: a schedule added at run time is
listed with what it runs (its task and arguments), where it comes from, its priority and
queue, beside a declared one."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from chromium import LIVE_TIMEOUT_MS, launched, skip_without_chromium
from harness import Cluster
from test_runtime_schedules import report_schedule, request

from fastworker_protocol import AddSchedule, ScheduleAdded

skip_without_chromium()

from playwright.async_api import Browser  # noqa: E402


@pytest.fixture
async def browser() -> AsyncIterator[Browser]:
    async with launched() as browser:
        yield browser


async def test_the_schedules_panel_shows_what_a_run_time_schedule_runs(
    cluster: Cluster, browser: Browser, tmp_path: Path
) -> None:
    # Given a declared periodic task, and a schedule added at run time with arguments
    cluster.control_plane("--task-modules", "it_tasks", "it_schedules", "it_periodic")
    spec = report_schedule(Path("runs.jsonl"), interval=3600.0, priority="high")
    async with cluster.client() as client:
        await cluster.workers(client, 1)
        assert isinstance(await request(cluster, AddSchedule(schedule=spec)), ScheduleAdded)

    # When the dashboard is opened
    page = await browser.new_page(viewport={"width": 1400, "height": 1000})
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    await page.goto(cluster.http + "/")
    row = '#schedules-table tr[data-schedule-name="acme-report"]'
    await page.wait_for_selector(row, timeout=LIVE_TIMEOUT_MS)
    declared = '#schedules-table tr[data-schedule-name="it_periodic.every_second"]'
    await page.wait_for_selector(declared, timeout=LIVE_TIMEOUT_MS)

    # Then each row says what it runs and where it comes from
    cells = await page.locator(f"{row} td").all_text_contents()
    runs = 'it_schedules.remember("runs.jsonl", "acme", fmt="csv")'
    assert cells[:3] == ["acme-report", f"{runs} run-time · high", "every 3600 s"]
    assert await page.get_attribute(f"{row} td:nth-child(2)", "title") == runs
    declared_cells = await page.locator(f"{declared} td").all_text_contents()
    full = "it_periodic.every_second"  # a declared schedule is named by its task
    assert declared_cells[:3] == [full, f"{full}() declared", "every 1 s"]
    await page.screenshot(path=str(tmp_path / "schedules.png"), full_page=True)
    assert errors == []
