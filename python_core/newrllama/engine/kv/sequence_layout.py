"""How a context's sequences are laid out, worked out in one place: prompts, then the prefix cache's runs, then
scratch sequences for label paths, each sequence a KV stream of n_ctx_seq cells. The context asks llama.cpp for
the layout that SequenceLayout.requested() plans and hands the one it got (SequenceLayout.made) to the scheduler
and the prefix cache. Pure Python, tested without a model."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import List

from ...errors import NewrllamaError
from ..policy import SchedulerConfig

# llama.cpp allows 256 sequences, and no more than n_batch (its output rows).
MAX_SEQUENCES = 256


@dataclass(frozen=True)
class SequenceLayout:
    n_seq: int           # prompts decoded together (ids 0 .. n_seq - 1)
    n_seq_cache: int     # runs of the prefix cache (the ids after the prompts'); 0: no prefix cache
    n_seq_scratch: int   # label paths' copies of their prompt (the last ids)
    n_batch: int         # tokens of one step
    n_ctx_seq: int = 0   # cells of each sequence's KV stream (0 until the context is made)
    n_swa: int = 0       # the model's sliding window (0: none)

    @classmethod
    def requested(cls, n_ctx: int, n_seq_max: int, n_batch: int, prefix_cache: bool,
                  config: SchedulerConfig) -> "SequenceLayout":
        """The layout to ask llama.cpp for: the prefix cache's runs and the scratch sequences share the sequences
        that n_batch leaves beside the prompts; the scratch sequences are as many as the prompts (every prompt may
        score labels at once)."""
        n_batch = min(n_batch, n_ctx)
        room = max(0, min(MAX_SEQUENCES, n_batch) - n_seq_max)
        n_seq_cache = min(config.prefix_cache_sequences, room) if prefix_cache else 0
        return cls(n_seq_max, n_seq_cache, min(n_seq_max, room - n_seq_cache), n_batch)

    def made(self, n_seq: int, n_seq_extra: int, n_batch: int, n_ctx_seq: int, n_swa: int) -> "SequenceLayout":
        """The layout of the context llama.cpp made from this request (what it reports)."""
        if n_seq_extra != self.n_seq_cache + self.n_seq_scratch:
            raise NewrllamaError(f"the context holds {n_seq_extra} sequences beside the prompts' "
                                 f"instead of {self.n_seq_cache + self.n_seq_scratch}")
        return dataclasses.replace(self, n_seq=n_seq, n_batch=n_batch, n_ctx_seq=n_ctx_seq, n_swa=n_swa)

    @property
    def n_sequences(self) -> int:
        """Every sequence: the most one step can hold."""
        return self.n_seq + self.n_seq_cache + self.n_seq_scratch

    @property
    def first_cache_seq(self) -> int:
        return self.n_seq

    @property
    def scratch_seqs(self) -> List[int]:
        """The scratch sequences, the highest first (taken lowest first)."""
        first = self.n_seq + self.n_seq_cache
        return list(range(first + self.n_seq_scratch - 1, first - 1, -1))

    @property
    def n_cells(self) -> int:
        """The cells the prompts and the cached runs may hold together."""
        return self.n_ctx_seq * (self.n_seq + self.n_seq_cache)
