"""Stop strings over an answer's bytes as it grows one piece at a time."""
from __future__ import annotations

from typing import Sequence


class StopMatcher:
    """Finds the earliest stop string in a growing text, looking only where the newest piece can complete one."""

    def __init__(self, stops: Sequence[str]) -> None:
        self.stops = [s.encode("utf-8", "surrogatepass") for s in stops]
        self.longest = max((len(s) for s in self.stops), default=0)

    def cut(self, text: bytes, piece_len: int) -> int:
        """Where the text ends if the newest piece completed a stop string, else -1."""
        best = -1
        for stop in self.stops:
            start = max(0, len(text) - piece_len - len(stop) + 1)
            at = text.find(stop, start)
            if at >= 0 and (best < 0 or at < best):
                best = at
        return best

    def held_back(self, text: bytes) -> int:
        """How many bytes at the end of text could still begin a stop string: a stream must not show them yet."""
        for n in range(min(self.longest - 1, len(text)), 0, -1):
            tail = text[-n:]
            if any(stop.startswith(tail) for stop in self.stops):
                return n
        return 0
