"""Where a long run writes its results as they come, and how a killed run resumes: the ``output``, ``ids``,
``resume`` and ``retry_errors`` of Context.generate_parallel, annotate() and a Cluster's calls, as one checked
object that each of them (and R) opens a RecordedRun with (results_file.py)."""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Hashable, Optional, Sequence, Union

from ..errors import InvalidArgumentError


@dataclass(frozen=True)
class Recording:
    """``output``: a JSON Lines file to which every result is appended as it finishes; ``ids``: one str or int per
    prompt, naming it in the file (else its position); ``resume``: run only the prompts not yet in ``output``;
    ``retry_errors`` (with ``resume``): also those whose line holds an error. No output: nothing is written."""

    output: Union[str, os.PathLike, None] = None
    ids: Optional[Sequence[Hashable]] = None
    resume: bool = False
    retry_errors: bool = False

    def __post_init__(self) -> None:
        if self.output is not None and not isinstance(self.output, (str, os.PathLike)):
            raise InvalidArgumentError(f"output must be a file path, got {type(self.output).__name__}")
        if not isinstance(self.resume, bool):
            raise InvalidArgumentError(f"resume must be True or False, got {self.resume!r}")
        if not isinstance(self.retry_errors, bool):
            raise InvalidArgumentError(f"retry_errors must be True or False, got {self.retry_errors!r}")
        if self.retry_errors and not self.resume:
            raise InvalidArgumentError("retry_errors=True runs again the failed prompts of a run being resumed: "
                                       "give it with resume=True and the run's output file")
        if self.resume and self.output is None:
            raise InvalidArgumentError("resume=True needs an output file to resume from")

    @property
    def writes(self) -> bool:
        """Whether the run has a file (without one, ``ids`` name nothing and the run is an ordinary call)."""
        return self.output is not None
