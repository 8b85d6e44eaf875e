"""asyncio bridges: awaiting a call, and streaming an answer into an event loop.

The engine thread finishes requests and produces text; these helpers hand both to
the event loop with call_soon_threadsafe, so a coroutine awaits an answer without
holding a thread, and a cancelled coroutine (a client that went away) cancels its
requests at once. A loop that is already closed is ignored: the engine thread
must never fail because a caller's loop ended first."""
from __future__ import annotations

import asyncio
from typing import AsyncIterator, Callable, Optional

from ..step.request import Call, Request
from .stream import StreamText


def _in_loop(loop: asyncio.AbstractEventLoop, fn: Callable[..., None], *args) -> None:
    try:
        loop.call_soon_threadsafe(fn, *args)
    except RuntimeError:  # the loop is closed: nobody is waiting any more
        pass


def _set_done(future: "asyncio.Future[None]") -> None:
    if not future.done():
        future.set_result(None)


async def wait_for_call(call: Call, cancel: Callable[[Call], None]) -> None:
    """Waits until every request of the call is finished; if the waiting coroutine is cancelled, the
    call's requests are cancelled too (the engine frees their sequences before its next step)."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    call.add_done_callback(lambda: _in_loop(loop, _set_done, done))
    try:
        await done
    except asyncio.CancelledError:
        cancel(call)
        raise


class AsyncTextStream(AsyncIterator[str]):
    """The text pieces of one answer for ``async for``; joined, they are ``completion.text``.

    The asyncio twin of TextStream (same hold-back of stop strings, same whole UTF-8
    characters). ``aclose()``, leaving ``async with``, or cancelling the task that
    iterates cancels the answer; the other prompts in the batch go on."""

    def __init__(self, call: Call, request: Optional[Request], cancel: Callable[[Call], None]) -> None:
        self._loop = asyncio.get_running_loop()
        self._queue: "asyncio.Queue[tuple]" = asyncio.Queue()
        self._text = StreamText(call)
        self._call = call
        self._cancel = cancel
        if request is not None:
            request.sink = lambda data, final: _in_loop(self._loop, self._queue.put_nowait, (data, final))

    @property
    def completion(self):
        """The whole answer once the stream has ended, else None."""
        return self._text.completion

    def __aiter__(self) -> "AsyncTextStream":
        return self

    async def __anext__(self) -> str:
        while not self._text.ended:
            if self._text.failed_early():
                break
            try:
                data, final = await self._queue.get()
            except asyncio.CancelledError:
                self._cancel(self._call)
                raise
            text = self._text.decode(data, final)
            if text:
                return text
        self._text.raise_if_failed()
        raise StopAsyncIteration

    async def aclose(self) -> None:
        """Cancels the answer if it is still running and waits until its sequence is free."""
        if not self._text.ended:
            self._cancel(self._call)
            await wait_for_call(self._call, self._cancel)
            self._text.ended = True

    async def __aenter__(self) -> "AsyncTextStream":
        return self

    async def __aexit__(self, *exc) -> None:
        await self.aclose()
