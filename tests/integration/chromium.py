"""Headless Chromium (Debian's) for the dashboard tests, driven by Playwright: one place for
where it is, how it starts, and the skip when it is missing outside CI."""

from __future__ import annotations

import os
import shutil
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.async_api import Browser

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",  # CI runs as root
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
LIVE_TIMEOUT_MS = 20_000


def skip_without_chromium() -> None:
    """Skip the calling test module when Chromium is missing, except under CI (where its
    absence is a failure: scripts/test installs it)."""
    if not os.path.exists(CHROMIUM) and not os.environ.get("CI"):
        pytest.skip(
            "Debian's chromium is not installed (scripts/test installs it when run as root)",
            allow_module_level=True,
        )


@asynccontextmanager
async def launched() -> AsyncIterator[Browser]:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            yield browser
        finally:
            await browser.close()
