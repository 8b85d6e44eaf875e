"""Tokenizer access over a model's C handle.

A context keeps its C model alive after Model.close() (the C side counts
references), so a context tokenizes and detokenizes through the Vocab it took at
creation rather than through the Model object."""
from __future__ import annotations

from typing import Dict, List, Sequence

from . import _lib
from ._lib import ffi, lib


class Vocab:
    def __init__(self, model_handle) -> None:
        self._model = model_handle
        self.n_vocab: int = lib.newrllama_model_n_vocab(model_handle)
        self._pieces: Dict[int, bytes] = {}

    def check_grammar(self, gbnf: str) -> None:
        """Raises InvalidArgumentError unless gbnf parses for this vocabulary."""
        err = _lib.new_error_slot()
        _lib.check(lib.newrllama_grammar_check(self._model, gbnf.encode("utf-8"), err), err)

    def tokenize(self, data: bytes, add_special: bool = True) -> List[int]:
        """Token ids of UTF-8 bytes; control tokens written as text become control tokens."""
        err = _lib.new_error_slot()
        tokens = ffi.new("int32_t **")
        n = ffi.new("size_t *")
        _lib.check(lib.newrllama_tokenize(self._model, data, len(data), bool(add_special), tokens, n, err), err)
        try:
            return list(ffi.unpack(tokens[0], n[0])) if n[0] else []
        finally:
            lib.newrllama_free_tokens(tokens[0])

    def detokenize(self, ids: Sequence[int]) -> bytes:
        err = _lib.new_error_slot()
        out = ffi.new("char **")
        n = ffi.new("size_t *")
        c_ids = ffi.new("int32_t[]", list(ids)) if ids else ffi.NULL
        _lib.check(lib.newrllama_detokenize(self._model, c_ids, len(ids), out, n, err), err)
        try:
            return ffi.unpack(out[0], n[0])
        finally:
            lib.newrllama_free_string(out[0])

    def piece(self, token: int) -> bytes:
        """The bytes one token adds to a text (possibly part of a UTF-8 character); cached, since the
        scheduler asks for every token it samples."""
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.detokenize([token])
        return piece
