"""The gateway's chat page in a real headless browser (Debian's chromium, driven by Selenium
through chromium-driver): streamed answers, tool cards, a front-end tool, an image, and a
confirmation approved with its button. Saves a screenshot to test-artifacts/."""

from __future__ import annotations

import asyncio
import base64
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.support.ui import WebDriverWait

from tests.agui_stack import Stack, agui_stack
from tests.e2e.commands import ROOT

pytestmark = pytest.mark.timeout(120)

WAIT = 20.0
"""Seconds the page may take to show what a step expects."""
ARTIFACTS = ROOT / "test-artifacts"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)


def _browser() -> WebDriver:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("chromium and chromium-driver are missing: run `make chromium`")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--mute-audio"):
        options.add_argument(flag)
    options.add_argument("--window-size=1100,1000")
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[tuple[Stack, WebDriver]]:
    async with agui_stack(tmp_path) as stack:
        browser = await asyncio.to_thread(_browser)
        try:
            await asyncio.to_thread(browser.get, stack.url + "/")
            yield stack, browser
        finally:
            await asyncio.to_thread(browser.quit)


async def _until(browser: WebDriver, check: Callable[[WebDriver], Any]) -> Any:
    """Wait (bounded) in a thread, so the gateway keeps serving on this loop."""
    return await asyncio.to_thread(WebDriverWait(browser, WAIT).until, check)


def _ask(browser: WebDriver, text: str) -> None:
    box = browser.find_element(By.ID, "prompt")
    box.send_keys(text)
    browser.find_element(By.ID, "send").click()


def _answers(browser: WebDriver) -> list[str]:
    return [
        e.text for e in browser.find_elements(By.CSS_SELECTOR, ".msg.assistant:not(.reasoning)")
    ]


def _said(text: str) -> Callable[[WebDriver], bool]:
    return lambda b: text in _answers(b)


def _idle(browser: WebDriver) -> bool:
    status = browser.find_element(By.ID, "status").text
    return status.startswith("done")


async def test_the_chat_page_streams_tools_and_asks_for_confirmation(
    page: tuple[Stack, WebDriver], tmp_path: Path
) -> None:
    stack, browser = page
    await asyncio.to_thread(_ask, browser, "What's the weather in Oslo?")
    await _until(browser, _said("The tool said: -3 °C, snow"))
    card = browser.find_element(By.CSS_SELECTOR, ".tool-card")
    assert "get_weather" in card.text.lower() and '{"city": "Oslo"}' in card.text
    assert card.get_attribute("data-state") == "success"
    assert "Let me check." in _answers(browser)
    await _until(browser, _idle)
    assert "tokens" in browser.find_element(By.ID, "status").text

    # A front-end tool: the page runs it and sends the result back by itself.
    await asyncio.to_thread(_ask, browser, "where am I?")
    zone = await asyncio.to_thread(
        browser.execute_script, "return Intl.DateTimeFormat().resolvedOptions().timeZone"
    )
    await _until(browser, _said(f"The tool said: {zone}"))

    # An image attached to the question reaches the agent as an image.
    picture = tmp_path / "dot.png"
    picture.write_bytes(PNG)
    await asyncio.to_thread(browser.find_element(By.ID, "file").send_keys, str(picture))
    await asyncio.to_thread(_ask, browser, "What is this?")
    await _until(browser, _said(f"I see an image (image/png, {len(PNG)} bytes)."))
    assert browser.find_elements(By.CSS_SELECTOR, ".msg.user img")

    # A tool that needs confirmation: the run pauses until the Approve button is pressed.
    await asyncio.to_thread(_ask, browser, "please delete my notes")
    approve = await _until(
        browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".confirm-card button.approve")
    )
    await _until(browser, _idle)
    assert "delete_file" in browser.find_element(By.CSS_SELECTOR, ".confirm-card").text
    await asyncio.to_thread(approve[0].click)
    await _until(browser, _said("The tool said: deleted notes.txt"))
    deleted = browser.find_elements(By.CSS_SELECTOR, ".tool-card")[-1]
    assert "deleted notes.txt" in deleted.text
    await _until(browser, _idle)

    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / "agui-chat-page.png"
    assert await asyncio.to_thread(browser.save_screenshot, str(shot))
    assert shot.stat().st_size > 10_000

    session = await stack.gateway.client.get_session(
        await asyncio.to_thread(browser.execute_script, "return document.body.dataset.threadId")
    )
    assert session.status == "idle"


async def test_a_run_error_shows_on_the_page(page: tuple[Stack, WebDriver]) -> None:
    _, browser = page
    await asyncio.to_thread(_ask, browser, "fail now")
    error = await _until(browser, lambda b: b.find_elements(By.CSS_SELECTOR, ".card.error"))
    assert "MODEL_ERROR" in error[0].text and "out of order" in error[0].text
