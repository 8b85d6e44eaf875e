"""The KV operations the scheduler and the prefix cache need, behind a small interface, so that their policy
is tested without a model (a fake that records what each sequence holds) and runs on a context with C."""
from __future__ import annotations

from typing import Protocol

from ... import _lib
from ..._lib import ffi, lib


class KvStore(Protocol):
    """The KV cells of a context's sequences."""

    def copy(self, src: int, dst: int, n_tokens: int) -> None:
        """Sequence dst holds src's first n_tokens tokens (-1: all of them) and nothing else."""

    def clear(self, seq: int) -> None:
        """Sequence seq holds nothing."""


class ContextKv:
    """A context's KV cache, through the C shim."""

    def __init__(self, ctx_handle) -> None:
        self._ctx = ctx_handle
        self._err = _lib.new_error_slot()

    def copy(self, src: int, dst: int, n_tokens: int) -> None:
        _lib.check(lib.newrllama_seq_copy(self._ctx, src, dst, n_tokens, self._err), self._err)

    def clear(self, seq: int) -> None:
        lib.newrllama_seq_clear(self._ctx, seq, ffi.NULL)
