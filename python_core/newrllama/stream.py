"""Streaming: the text of one answer, piece by piece, as the engine generates it."""
from __future__ import annotations

import codecs
import queue
from typing import Callable, Iterator, Optional

from .errors import GenerationError
from .request import Call, Request
from .results import Completion


class TextStream(Iterator[str]):
    """Iterates over the text pieces of one answer; joined, they are ``completion.text``.

    Text that could still turn out to be the start of a stop string is held back
    until it is clear, and a UTF-8 character split between tokens is shown whole.
    A prompt that cannot run raises GenerationError. Closing the stream early (or
    leaving a ``with`` block, or Ctrl-C while iterating) cancels the answer and frees
    its sequence; the other prompts in the batch go on.
    """

    def __init__(self, call: Call, request: Optional[Request], cancel: Callable[[Call], None]) -> None:
        self._call = call
        self._cancel = cancel
        self._queue: "queue.SimpleQueue[tuple]" = queue.SimpleQueue()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._ended = False
        if request is not None:
            request.sink = self._put

    def _put(self, data: bytes, final: bool) -> None:
        self._queue.put((data, final))

    @property
    def completion(self) -> Optional[Completion]:
        """The whole answer once the stream has ended, else None."""
        return self._call.completions[0] if self._ended else None

    def __next__(self) -> str:
        while not self._ended:
            if self._call.requests[0] is None:  # failed before it could run
                self._ended = True
                break
            try:
                data, final = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            except BaseException:
                self.close()
                raise
            text = self._decoder.decode(data, final)
            self._ended = final
            if text:
                return text
        done = self._call.completions[0]
        if done is not None and done.finish_reason == "error":
            raise GenerationError(done.error or "generation failed")
        raise StopIteration

    def close(self) -> None:
        """Cancels the answer if it is still running and waits until its sequence is free."""
        if not self._ended:
            self._cancel(self._call)
            self._call.wait(False, self._cancel)
            self._ended = True

    def __enter__(self) -> "TextStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if not getattr(self, "_ended", True):
            self._cancel(self._call)
