"""Ownership of one C handle: closed once, deterministically (close(), with) or at collection."""
from __future__ import annotations

import threading
from typing import Callable, TypeVar

from ...errors import ClosedError

Self = TypeVar("Self", bound="OwnedHandle")


class OwnedHandle:
    _what = "object"

    def __init__(self, handle, free: Callable[[object], None]) -> None:
        # Reentrant: a context holds it through a whole generation call and close() may come from that thread.
        self._lock = threading.RLock()
        self._free = free
        self._handle = handle

    @property
    def handle(self):
        self.check_open()
        return self._handle

    def check_open(self) -> None:
        if self._handle is None:
            raise ClosedError(f"this {self._what} is closed")

    @property
    def closed(self) -> bool:
        return self._handle is None

    def close(self) -> None:
        with self._lock:
            if self._handle is not None:
                self._free(self._handle)
                self._handle = None

    def __enter__(self: Self) -> Self:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_handle", None) is not None:
            self.close()
