"""What a step did for the holder of one of its slots, as the holder reports it to the scheduler.

A holder (a prompt's Request, a cached run being decoded, a label path being scored) reads its slot
after a step and returns one of its events, or None while it has not reached its next stop; when a step
fails, the scheduler asks it for the event that says what the failure means for it. The holder
changes only its own fields: what follows for the batch (retiring a prompt, copying a run into
the prompts that wait for it, freeing a scratch sequence) is the scheduler's decision, taken in
Scheduler.act. Events go up, decisions go down. Each event is defined beside its holder, which imports nothing
of the scheduler's side; this module gathers them (docs/design/layers.md, "A step")."""
from __future__ import annotations

from typing import Union

from .choices import LabelPathCleared, LabelPathEvent, LabelPathFailed, LabelPathScored
from ..kv.prefix_cache import PrefixCleared, PrefixEvent, PrefixFailed, PrefixReady
from .request import FirstTokensScored, PromptCleared, PromptEvent, PromptFailed, TokenSampled

StepEvent = Union[PromptEvent, PrefixEvent, LabelPathEvent]

__all__ = ["FirstTokensScored", "LabelPathCleared", "LabelPathFailed", "LabelPathScored", "PromptCleared",
           "PromptFailed", "PrefixCleared", "PrefixFailed", "PrefixReady", "StepEvent", "TokenSampled"]
