"""What a step did for the holder of one of its slots, as the holder reports it to the scheduler.

A holder (a prompt's Request, a cached run being decoded, a label path being scored) reads its slot
after a step and returns one of these, or None while it has not reached its next stop; when a step
fails, the scheduler asks it for the event that says what the failure means for it. The holder
changes only its own fields: what follows for the batch (retiring a prompt, copying a run into
the prompts that wait for it, freeing a scratch sequence) is the scheduler's decision, taken in
Scheduler.act. Events go up, decisions go down."""
from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Union

if TYPE_CHECKING:
    from .choices import LabelJob
    from .prefix_cache import Prefix
    from .request import Request


@dataclass(frozen=True)
class TokenSampled:
    """A token was sampled for a prompt (negative: its grammar allows none)."""

    request: Request
    token: int
    is_eog: bool


@dataclass(frozen=True)
class FirstTokensScored:
    """A prompt's last row scored the first token of each of its labels."""

    request: Request


@dataclass(frozen=True)
class LabelPathScored:
    """A label path's rows are scored (its job's scratch sequence can go)."""

    job: LabelJob


@dataclass(frozen=True)
class RunReady:
    """A cached run is decoded to its end: the prompts waiting for it can copy it."""

    prefix: Prefix


@dataclass(frozen=True)
class PromptCleared:
    """A failed step left a prompt's sequence empty: it decodes its whole prompt itself from now on."""

    request: Request


@dataclass(frozen=True)
class RunCleared:
    """A failed step left a cached run's sequence empty: it is decoded again from its start."""

    prefix: Prefix


@dataclass(frozen=True)
class LabelPathCleared:
    """A failed step left a label path's scratch sequence empty: it is scored later from a new copy."""

    job: LabelJob


@dataclass(frozen=True)
class PromptFailed:
    """A prompt (or one of its label paths) cannot be decoded even alone."""

    request: Request
    why: str


@dataclass(frozen=True)
class RunFailed:
    """A cached run cannot be decoded even alone: its prompts decode their starts themselves."""

    prefix: Prefix


StepEvent = Union[TokenSampled, FirstTokensScored, LabelPathScored, RunReady, PromptCleared, RunCleared,
                  LabelPathCleared, PromptFailed, RunFailed]
