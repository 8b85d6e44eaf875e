"""Progress bars of long calls. ``progress=None`` (the default) shows one where someone watches (stderr is a
terminal) and only once a call has run SHOW_AFTER seconds, so that short calls and logs stay quiet;
True always shows one, False never."""
from __future__ import annotations

import sys
from typing import Any, Optional

SHOW_AFTER = 3.0  # seconds


def progress_bar(total: int, progress: Optional[bool], unit: str, desc: str) -> Any:
    from tqdm.auto import tqdm
    if progress is None:
        return tqdm(total=total, unit=unit, desc=desc, disable=not sys.stderr.isatty(), delay=SHOW_AFTER)
    return tqdm(total=total, unit=unit, desc=desc, disable=not progress)
