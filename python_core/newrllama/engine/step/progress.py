"""Progress of long calls. ``progress=None`` (the default) shows a tqdm bar where someone watches (stderr is a
terminal) and only once a call has run SHOW_AFTER seconds, so that short calls and logs stay quiet; True always
shows one, False never; a function is told ``(done, total)`` as the call goes on, in the caller's thread (R draws
its own bar so)."""
from __future__ import annotations

import sys
from typing import Any, Callable, Union

from ...errors import InvalidArgumentError

SHOW_AFTER = 3.0  # seconds

Progress = Union[None, bool, Callable[[int, int], Any]]


class _Reporter:
    """What a call updates, for a caller's function: its running count, told as (done, total)."""

    def __init__(self, report: Callable[[int, int], Any], total: int) -> None:
        self.report, self.total, self.done = report, total, 0
        report(0, total)

    def update(self, n: int) -> None:
        if n:
            self.done += n
            self.report(self.done, self.total)

    def close(self) -> None:
        pass


def check_progress(progress: object) -> Progress:
    """The caller's progress setting, checked before any work starts."""
    if progress is not None and not isinstance(progress, bool) and not callable(progress):
        raise InvalidArgumentError(f"progress must be True, False, None or a function(done, total), got {progress!r}")
    return progress  # type: ignore[return-value]


def progress_bar(total: int, progress: Progress, unit: str, desc: str) -> Any:
    """What a call updates as it goes (``progress`` checked by check_progress)."""
    if callable(progress):
        return _Reporter(progress, total)
    from tqdm.auto import tqdm
    if progress is None:
        return tqdm(total=total, unit=unit, desc=desc, disable=not sys.stderr.isatty(), delay=SHOW_AFTER)
    return tqdm(total=total, unit=unit, desc=desc, disable=not progress)
