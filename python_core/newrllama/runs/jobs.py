"""What a recorded run (on a Context or a Cluster) asks of its job: the Job interface that the two kinds of job
implement (engine/calls/generation_job.py, labels/annotation_job.py), each knowing how to hand a group of its prompts
to a worker or a context and how its results become lines of the output file and come back from them; the
callers' ids of the prompts; and the digest that ties a line to the prompt and settings that made it."""
from __future__ import annotations

import hashlib
import json
from typing import Any, Hashable, List, Optional, Protocol, Sequence, Tuple

from ..columns import column_values
from ..errors import InvalidArgumentError

MAX_ID_LENGTH = 1024


def check_ids(ids: object, n: int) -> Optional[List[Hashable]]:
    """The caller's ids of the prompts (str or int, distinct), which name them in the output file."""
    if ids is None:
        return None
    out = column_values(ids, "ids", "str or int, one per prompt")
    if len(out) != n:
        raise InvalidArgumentError(f"ids has {len(out)} entries for {n} prompts; give one per prompt")
    for i, x in enumerate(out):
        if isinstance(x, bool) or not isinstance(x, (str, int)) or (isinstance(x, str) and not 0 < len(x) <= MAX_ID_LENGTH):
            raise InvalidArgumentError(f"ids[{i}] must be a non-empty str (at most {MAX_ID_LENGTH} characters) "
                                       f"or an int, got {x!r}")
    if len(set(out)) != n:
        dup = next(x for x in out if out.count(x) > 1)
        raise InvalidArgumentError(f"ids holds {dup!r} more than once; every prompt needs its own id")
    return out


def digest(*parts: Any) -> str:
    text = json.dumps(parts, ensure_ascii=False, sort_keys=True, default=repr)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:32]


class Job(Protocol):
    """A recorded run's prompts (or texts) and what is done with them."""

    method: str           # the worker's method that runs a chunk ("generate_parallel", "annotate")
    digests: List[str]    # per prompt: what a resumed line must match (the prompt and its settings)
    settings_digests: List[str]  # per prompt: its settings alone (a changed prompt runs again, changed settings not)

    def __len__(self) -> int: ...

    def payload(self, indices: Sequence[int]) -> Tuple[Any, ...]:
        """The arguments of the worker's method for these prompts."""

    def record(self, result: Any) -> dict:
        """A result as the fields of its line."""

    def from_record(self, record: dict) -> Any:
        """A result back from its line."""

    def failed(self, message: str) -> Any:
        """The result of a prompt that could not run."""

    def has_error(self, result: Any) -> bool: ...
