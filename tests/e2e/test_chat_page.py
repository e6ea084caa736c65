"""The gateway's chat page in a real headless browser (Debian's chromium, driven by Selenium
through chromium-driver), against a real gateway and agent service: cards in event order, a
confirmation approved, edited and rejected with a reason, paused/done/stopped/error states,
Markdown sanitised, a front-end tool, an image, Stop, a reload mid-reply that shows the
history and the rest of the reply, the list of conversations, and the agent or the gateway
down. Screenshots go to test-artifacts/."""

from __future__ import annotations

import asyncio
import base64
import json
import shutil
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait

from tests.agui_stack import Stack, agui_stack
from tests.e2e.commands import ROOT
from tests.service_tools import GateState

pytestmark = pytest.mark.timeout(180)

WAIT = 20.0
"""Seconds the page may take to show what a step expects."""
ARTIFACTS = ROOT / "test-artifacts"
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
ENDED = ("done", "paused", "stopped", "error")


def _browser() -> WebDriver:
    chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    if chromium is None or driver is None:
        pytest.fail("chromium and chromium-driver are missing: run `make chromium`")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--mute-audio"):
        options.add_argument(flag)
    options.add_argument("--window-size=1200,1000")
    return webdriver.Chrome(options=options, service=Service(executable_path=driver))


@pytest.fixture
async def page(tmp_path: Path) -> AsyncIterator[tuple[Stack, WebDriver]]:
    GateState.reset()
    async with agui_stack(tmp_path) as stack:
        browser = await asyncio.to_thread(_browser)
        try:
            await asyncio.to_thread(browser.get, stack.url + "/")
            await _until(browser, lambda b: _state(b) == "idle")
            yield stack, browser
        finally:
            GateState.release.set()
            await asyncio.to_thread(browser.quit)


async def _until(browser: WebDriver, check: Callable[[WebDriver], Any]) -> Any:
    """Wait (bounded) in a thread, so the gateway keeps serving on this loop."""
    return await asyncio.to_thread(WebDriverWait(browser, WAIT).until, check)


async def _ask(browser: WebDriver, text: str) -> None:
    def type_and_send() -> None:
        browser.find_element(By.ID, "prompt").send_keys(text)
        browser.find_element(By.ID, "send").click()

    await asyncio.to_thread(type_and_send)


async def _click(element: WebElement) -> None:
    await asyncio.to_thread(element.click)


def _state(browser: WebDriver) -> str:
    return str(browser.find_element(By.TAG_NAME, "body").get_attribute("data-state"))


def _status(browser: WebDriver) -> str:
    return str(browser.find_element(By.ID, "status").text)


async def _ended(browser: WebDriver, state: str) -> None:
    """Wait for the run to end in `state` (it must not end in another)."""
    await _until(browser, lambda b: _state(b) in ENDED)
    assert _state(browser) == state, _status(browser)


def _answers(browser: WebDriver) -> list[str]:
    return [
        e.text for e in browser.find_elements(By.CSS_SELECTOR, ".msg.assistant:not(.reasoning)")
    ]


def _said(text: str) -> Callable[[WebDriver], bool]:
    return lambda b: text in _answers(b)


def _cards(browser: WebDriver) -> list[WebElement]:
    return browser.find_elements(By.CSS_SELECTOR, ".tool-card")


def _parts(card: WebElement) -> list[str]:
    """The card's parts in document order: args, confirm, result, state."""
    return [e.get_attribute("class") or "" for e in card.find_elements(By.XPATH, "./*")]


async def _shot(browser: WebDriver, name: str) -> Path:
    ARTIFACTS.mkdir(exist_ok=True)
    shot = ARTIFACTS / name
    assert await asyncio.to_thread(browser.save_screenshot, str(shot))
    assert shot.stat().st_size > 10_000
    return shot


async def _run_script(browser: WebDriver, script: str) -> Any:
    return await asyncio.to_thread(browser.execute_script, script)


async def test_cards_markdown_confirmations_and_a_front_end_tool(
    page: tuple[Stack, WebDriver], tmp_path: Path
) -> None:
    stack, browser = page
    placeholder = browser.find_element(By.ID, "prompt").get_attribute("placeholder") or ""
    assert "What's the weather in Oslo?" in placeholder and "Delete the file" in placeholder

    await _ask(browser, "What's the weather in Oslo?")
    await _ended(browser, "done")
    card = _cards(browser)[0]
    assert "get_weather" in card.text.lower() and '{"city": "Oslo"}' in card.text
    assert card.get_attribute("data-state") == "success"
    assert _answers(browser) == ["Let me check.", "The tool said: -3 °C, snow"]
    assert _status(browser).startswith("done · ") and "tokens" in _status(browser)

    # Markdown renders; what the sanitiser must strip neither shows nor runs.
    await _ask(browser, "markdown please")
    await _ended(browser, "done")
    answer = browser.find_elements(By.CSS_SELECTOR, ".msg.assistant")[-1]
    assert answer.find_element(By.TAG_NAME, "strong").text == "bold"
    assert [li.text for li in answer.find_elements(By.TAG_NAME, "li")] == ["one", "two"]
    assert not answer.find_elements(By.TAG_NAME, "script")
    assert all(i.get_attribute("onerror") is None for i in answer.find_elements(By.TAG_NAME, "img"))
    assert await _run_script(browser, "return window.pwned === undefined") is True

    # A front-end tool: the page runs it and sends the result back by itself.
    await _ask(browser, "where am I?")
    zone = await _run_script(browser, "return Intl.DateTimeFormat().resolvedOptions().timeZone")
    await _until(browser, _said(f"The tool said: {zone}"))
    await _ended(browser, "done")

    # An image attached to the question reaches the agent as an image.
    picture = tmp_path / "dot.png"
    picture.write_bytes(PNG)
    await asyncio.to_thread(browser.find_element(By.ID, "file").send_keys, str(picture))
    await _ask(browser, "What is this?")
    await _until(browser, _said(f"I see an image (image/png, {len(PNG)} bytes)."))
    assert browser.find_elements(By.CSS_SELECTOR, ".msg.user img")

    # A confirmation: the run pauses (and says so) inside the card of the call it is about.
    await _ask(browser, "please delete my notes")
    await _ended(browser, "paused")
    assert _status(browser) == "paused: waiting for your confirmation"
    card = _cards(browser)[-1]
    assert "Allow delete_file with" in card.find_element(By.CSS_SELECTOR, ".confirm").text
    approve = card.find_element(By.CSS_SELECTOR, ".confirm button.approve")
    await _click(approve)
    await _until(browser, _said("The tool said: deleted notes.txt"))
    await _ended(browser, "done")
    assert all(not b.is_enabled() for b in card.find_elements(By.CSS_SELECTOR, ".confirm button"))
    assert card.find_element(By.CSS_SELECTOR, ".confirm").get_attribute("data-answer") == "approved"
    assert _parts(card) == ["", "args", "confirm", "result", "state"]  # the answer, then its result
    await _shot(browser, "agui-chat-page.png")

    # Edit the arguments, then approve: the call runs with the new ones.
    await _ask(browser, "delete it again")
    await _ended(browser, "paused")
    card = _cards(browser)[-1]
    await _click(card.find_element(By.CSS_SELECTOR, ".confirm button.edit"))
    field = card.find_element(By.CSS_SELECTOR, ".confirm textarea")
    await asyncio.to_thread(field.clear)
    await asyncio.to_thread(field.send_keys, json.dumps({"path": "other.txt"}))
    await _click(card.find_elements(By.CSS_SELECTOR, ".confirm button.approve")[-1])
    await _until(browser, _said("The tool said: deleted other.txt"))
    await _ended(browser, "done")
    assert card.find_element(By.CSS_SELECTOR, ".confirm").get_attribute("data-answer") == "edited"

    # Reject with a reason: the model reads it, the call did not run.
    await _ask(browser, "delete once more")
    await _ended(browser, "paused")
    card = _cards(browser)[-1]
    await _click(card.find_element(By.CSS_SELECTOR, ".confirm button.reject"))
    reason = card.find_element(By.CSS_SELECTOR, ".confirm input.reason")
    await asyncio.to_thread(reason.send_keys, "keep that file")
    await _click(card.find_elements(By.CSS_SELECTOR, ".confirm button.reject")[-1])
    await _until(browser, _said("The tool said: The user denied this call: keep that file"))
    await _ended(browser, "done")
    assert card.get_attribute("data-state") == "denied"
    await _shot(browser, "agui-chat-review.png")

    thread = await _run_script(browser, "return document.body.dataset.threadId")
    assert (await stack.gateway.client.get_session(thread)).status == "idle"


async def test_stop_a_reload_mid_reply_history_and_the_conversations(
    page: tuple[Stack, WebDriver],
) -> None:
    _, browser = page
    # Stop interrupts the running reply.
    await _ask(browser, "hold the gate")
    async with asyncio.timeout(WAIT):
        await GateState.started.wait()
    stop = browser.find_element(By.ID, "stop")
    await _until(browser, lambda b: stop.is_enabled())
    await _click(stop)
    await _ended(browser, "stopped")
    assert _status(browser) == "stopped: the reply was interrupted"
    assert not stop.is_enabled()

    # A reload while a reply runs: the history from the session, then the rest of the reply.
    GateState.reset()
    await _ask(browser, "the gate again")
    async with asyncio.timeout(WAIT):
        await GateState.started.wait()
    await asyncio.to_thread(browser.refresh)
    await _until(browser, lambda b: _state(b) == "running")
    users = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".msg.user")]
    assert users == ["hold the gate", "the gate again"]
    assert [c.get_attribute("data-state") for c in _cards(browser)] == ["interrupted", None]
    await _shot(browser, "agui-chat-reload-running.png")
    GateState.release.set()
    await _until(browser, _said("The tool said: released"))
    await _ended(browser, "done")
    assert _cards(browser)[-1].get_attribute("data-state") == "success"
    await _shot(browser, "agui-chat-reload-finished.png")

    # Reloaded when idle, the whole conversation is back.
    await asyncio.to_thread(browser.refresh)
    await _until(browser, _said("The tool said: released"))
    await _ended(browser, "done")
    first = await _run_script(browser, "return document.body.dataset.threadId")

    # The list of conversations: a new one, then back to the first.
    await _click(browser.find_element(By.ID, "new"))
    await _until(browser, lambda b: not b.find_elements(By.CSS_SELECTOR, ".msg"))
    await _ask(browser, "hello there")
    await _until(browser, _said("Hello! You said: hello there"))
    await _ended(browser, "done")
    links = await _until(
        browser, lambda b: len(b.find_elements(By.CSS_SELECTOR, "#threads a")) == 2 and b
    )
    listed = {
        a.get_attribute("data-thread-id"): a
        for a in links.find_elements(By.CSS_SELECTOR, "#threads a")
    }
    assert listed[first].text.startswith("hold the gate")
    await _click(listed[first])
    await _until(browser, _said("The tool said: released"))
    assert "Hello! You said: hello there" not in _answers(browser)
    await _shot(browser, "agui-chat-conversations.png")


async def test_a_failed_run_and_the_agent_or_the_gateway_down(
    page: tuple[Stack, WebDriver],
) -> None:
    stack, browser = page
    await _ask(browser, "fail now")
    await _ended(browser, "error")
    error = browser.find_elements(By.CSS_SELECTOR, ".card.error")[-1]
    assert "MODEL_ERROR" in error.text and "out of order" in error.text
    assert _status(browser) == "failed: MODEL_ERROR"

    agent = f"127.0.0.1:{stack.agent.port}"
    await stack.agent.stop(0)
    await _ask(browser, "anyone there?")
    await _ended(browser, "error")
    error = browser.find_elements(By.CSS_SELECTOR, ".card.error")[-1]
    assert error.text.endswith(
        f"The agent service at {agent} does not answer: is it up? Start it with hookmesh up."
    )
    await _shot(browser, "agui-chat-agent-down.png")

    await stack.gateway.stop(0)
    await _ask(browser, "and now?")
    await _ended(browser, "error")
    error = browser.find_elements(By.CSS_SELECTOR, ".card.error")[-1]
    host = stack.url.removeprefix("http://")
    assert error.text.endswith(f"The gateway at {host} does not answer: is hookmesh up running?")
    await _shot(browser, "agui-chat-gateway-down.png")


async def test_a_nested_ask_shows_who_asks_and_its_approval_runs_it(tmp_path: Path) -> None:
    """A grandchild's ask (``cleaning_team``): the page lists the sub-agents' steps under
    their path, the confirmation says who asks, and approving it finishes the reply."""
    from hookmesh.services.agui import load_agui_config, start_agui_gateway
    from tests.service_tools import team_service

    async with team_service(tmp_path) as address:
        gateway = await start_agui_gateway(
            load_agui_config(None, agent=address), address="127.0.0.1:0"
        )
        browser = await asyncio.to_thread(_browser)
        try:
            await asyncio.to_thread(browser.get, f"http://127.0.0.1:{gateway.port}/")
            await _until(browser, lambda b: _state(b) == "idle")
            await _ask(browser, "clean up")
            await _ended(browser, "paused")
            confirm = browser.find_element(By.CSS_SELECTOR, ".confirm")
            assert confirm.find_element(By.CSS_SELECTOR, ".asker").text == "asked by ops/janitor"
            assert "ops/janitor asks: Allow confirm_ops" in confirm.text
            nested = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".event.nested")]
            assert "[ops] → ask_janitor" in nested
            assert any(t.startswith("[ops/janitor] asks to confirm delete_file") for t in nested)
            await _click(confirm.find_element(By.CSS_SELECTOR, "button.approve"))
            await _until(browser, _said("All clean."))
            await _ended(browser, "done")
            nested = [e.text for e in browser.find_elements(By.CSS_SELECTOR, ".event.nested")]
            assert "[ops/janitor] ← success" in nested
        finally:
            await asyncio.to_thread(browser.quit)
            await gateway.stop(0.5)


async def test_a_workers_front_end_call_says_who_asks_and_runs_in_the_browser(
    tmp_path: Path,
) -> None:
    """A worker calls the page's front-end tool `get_location` (``browser_locating_team``):
    the page shows the call as that tool, says who asks, runs it and continues with the
    result, which reaches the worker; and a thread left paused on it, opened later, does
    the same from the thread's history."""
    from hookmesh.services.agui import load_agui_config, start_agui_gateway
    from tests.agui_stack import post_run, run_input
    from tests.service_tools import external_service

    for i, opened in enumerate((False, True)):
        async with external_service(
            tmp_path / str(i), team=True, factory="browser_locating_team"
        ) as address:
            gateway = await start_agui_gateway(
                load_agui_config(None, agent=address), address="127.0.0.1:0"
            )
            url = f"http://127.0.0.1:{gateway.port}/"
            browser = await asyncio.to_thread(_browser)
            try:
                if opened:  # paused by another client, which left the call to the page
                    async with httpx.AsyncClient(base_url=url, timeout=WAIT) as http:
                        user = {"id": "u1", "role": "user", "content": "where am I?"}
                        _, events = await post_run(http, run_input("t-left", "r1", [user]))
                    assert events[-1]["outcome"]["pendingToolCallIds"]
                    await asyncio.to_thread(browser.get, url + "#thread=t-left")
                else:
                    await asyncio.to_thread(browser.get, url)
                    await _until(browser, lambda b: _state(b) == "idle")
                    await _ask(browser, "where am I?")
                await _until(browser, _said("Thanks."))
                await _ended(browser, "done")
                zone = await _run_script(
                    browser, "return Intl.DateTimeFormat().resolvedOptions().timeZone"
                )
                titles = [c.find_element(By.TAG_NAME, "h3").text.lower() for c in _cards(browser)]
                assert titles == ["tool · ask_scout", "tool · get_location", "tool · ask_scout"]
                card = _cards(browser)[1]  # the stand-in ask_scout call resumed the worker
                assert card.find_element(By.CSS_SELECTOR, ".asker").text == "asked by scout"
                assert card.get_attribute("data-state") == "ran in the browser"
                assert f"The user is in {zone}." in _answers(browser)  # the worker got it
                if not opened:
                    nested = [
                        e.text for e in browser.find_elements(By.CSS_SELECTOR, ".event.nested")
                    ]
                    assert any(t.startswith("[scout] asks to run get_location") for t in nested)
                    await _shot(browser, "agui-chat-nested-front-end-tool.png")
            finally:
                await asyncio.to_thread(browser.quit)
                await gateway.stop(0.5)
