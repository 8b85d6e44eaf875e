"""Streaming: the text of one answer, piece by piece, as the engine generates it."""
from __future__ import annotations

import codecs
import queue
from typing import Callable, Iterator, Optional

from ...errors import GenerationError
from ..step.request import Call, Request
from ..step.results import Completion


class StreamText:
    """What a stream of one answer shows, shared by TextStream and AsyncTextStream: bytes from the engine
    decoded as UTF-8 across token boundaries, the end, and the error of a prompt that failed."""

    def __init__(self, call: Call) -> None:
        self._call = call
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self.ended = False

    @property
    def completion(self) -> Optional[Completion]:
        return self._call.completions[0] if self.ended else None

    def failed_early(self) -> bool:
        """True (and the stream ended) if the prompt could not run at all, so no text will come."""
        if self._call.requests[0] is None:
            self.ended = True
        return self.ended

    def decode(self, data: bytes, final: bool) -> str:
        self.ended = final
        return self._decoder.decode(data, final)

    def raise_if_failed(self) -> None:
        done = self._call.completions[0]
        if done is not None and done.finish_reason == "error":
            raise GenerationError(done.error or "generation failed")


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
        self._text = StreamText(call)
        if request is not None:
            request.sink = self._put

    def _put(self, data: bytes, final: bool) -> None:
        self._queue.put((data, final))

    @property
    def completion(self) -> Optional[Completion]:
        """The whole answer once the stream has ended, else None."""
        return self._text.completion

    def __next__(self) -> str:
        while not self._text.ended:
            if self._text.failed_early():
                break
            try:
                data, final = self._queue.get(timeout=0.1)
            except queue.Empty:
                continue
            except BaseException:
                self.close()
                raise
            text = self._text.decode(data, final)
            if text:
                return text
        self._text.raise_if_failed()
        raise StopIteration

    def close(self) -> None:
        """Cancels the answer if it is still running and waits until its sequence is free."""
        if not self._text.ended:
            self._cancel(self._call)
            self._call.wait(False, self._cancel)
            self._text.ended = True

    def __enter__(self) -> "TextStream":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        text = getattr(self, "_text", None)
        if text is not None and not text.ended:
            self._cancel(self._call)
