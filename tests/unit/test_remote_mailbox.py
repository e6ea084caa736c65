"""An invocation's mailbox keeps the per-message deadline with one timer per invocation."""

from __future__ import annotations

import asyncio

import pytest

from hookmesh.remote._mailbox import Mailbox


async def test_a_message_put_before_the_wait_is_taken_at_once() -> None:
    inbox = Mailbox(5.0)
    inbox.put_nowait("call_next")
    assert await inbox.get() == "call_next"
    assert len(inbox) == 0


async def test_the_timer_armed_by_an_earlier_wait_does_not_cut_a_later_wait_short() -> None:
    inbox = Mailbox(5.0)
    waiting = asyncio.create_task(inbox.get())
    await asyncio.sleep(0)  # let the wait begin: it arms the timer
    loop = asyncio.get_running_loop()
    # The timer fires while a wait that began just now is pending: it re-arms, not fails.
    inbox._since = loop.time()
    inbox._expire()
    assert not waiting.done()
    assert inbox._timer is not None
    inbox.put_nowait("done")
    assert await waiting == "done"
    inbox.close()


async def test_a_wait_fails_once_the_timeout_passed_since_it_began() -> None:
    inbox = Mailbox(5.0)
    waiting = asyncio.create_task(inbox.get())
    await asyncio.sleep(0)
    inbox._since = asyncio.get_running_loop().time() - 5.0
    inbox._expire()
    with pytest.raises(TimeoutError):
        await waiting
    inbox.close()


async def test_a_mailbox_without_a_timeout_waits_with_no_timer() -> None:
    outgoing = Mailbox()
    waiting = asyncio.create_task(outgoing.get())
    await asyncio.sleep(0)
    assert outgoing._timer is None
    outgoing.put_nowait(None)
    outgoing.put_nowait("request")
    assert await waiting is None
    assert outgoing.get_nowait() == "request"
