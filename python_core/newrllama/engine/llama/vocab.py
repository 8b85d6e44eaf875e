"""Tokenizer access over a model's C handle.

A context keeps its C model alive after Model.close() (the C side counts
references), so a context tokenizes and detokenizes through the Vocab it took at
creation rather than through the Model object."""
from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Dict, List, Optional, Sequence, Tuple

from ... import _lib
from ..._lib import ffi, lib
from .answer_end import AnswerEnds

# Label sets whose tokens a vocabulary keeps (a server may see a new set with every request).
LABEL_SETS_KEPT = 64


class Vocab:
    def __init__(self, model_handle) -> None:
        self._model = model_handle
        self.n_vocab: int = lib.newrllama_model_n_vocab(model_handle)
        self._pieces: Dict[int, bytes] = {}
        self._answer_ends: Optional[AnswerEnds] = None
        self._labels: "OrderedDict[Tuple[Tuple[str, ...], bool], List[List[int]]]" = OrderedDict()
        self._labels_lock = threading.Lock()

    @property
    def model_handle(self):
        return self._model

    def end_of_generation_tokens(self) -> List[int]:
        """The model's end-of-turn and end-of-sequence tokens, those it has."""
        return [t for t in (lib.newrllama_token_eot(self._model), lib.newrllama_token_eos(self._model)) if t >= 0]

    @property
    def answer_ends(self) -> AnswerEnds:
        """The tokens that end an answer (see answer_end.py), worked out at first use."""
        if self._answer_ends is None:
            self._answer_ends = AnswerEnds(self)
        return self._answer_ends

    def parse_grammar(self, gbnf: str):
        """gbnf parsed for this vocabulary, once for all the samplers it constrains (freed when no request holds
        it); raises InvalidArgumentError unless it parses."""
        err = _lib.new_error_slot()
        out = ffi.new("newrllama_grammar_handle *")
        _lib.check(lib.newrllama_grammar_parse(self._model, gbnf.encode("utf-8"), out, err), err)
        return ffi.gc(out[0], lib.newrllama_grammar_free)

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

    def label_tokens(self, labels: Tuple[str, ...], spaced: bool) -> List[List[int]]:
        """The tokens each label adds after a prompt (with a leading space if the prompt ends in a word), kept for
        the last LABEL_SETS_KEPT label sets: a call's labels are tokenized once, whoever asks (the sizing of a
        context, then every prompt's scoring)."""
        key = (labels, spaced)
        with self._labels_lock:  # callers prepare their calls in their own threads
            tokens = self._labels.get(key)
            if tokens is not None:
                self._labels.move_to_end(key)
                return tokens
        tokens = [self.tokenize(((" " + label) if spaced else label).encode("utf-8"), False) for label in labels]
        with self._labels_lock:
            self._labels[key] = tokens
            if len(self._labels) > LABEL_SETS_KEPT:
                self._labels.popitem(last=False)
        return tokens

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

    def apply_chat_template(self, roles: Sequence[str], contents: Sequence[str], add_assistant: bool,
                            template: Optional[str] = None) -> str:
        """The chat template (the model's, or ``template``) applied to checked messages."""
        # The arrays hold raw pointers: the lists keep the strings they point to alive.
        keep_roles = [ffi.new("char[]", r.encode()) for r in roles]
        keep_contents = [ffi.new("char[]", c.encode("utf-8", "surrogatepass")) for c in contents]
        c_roles = ffi.new("const char *[]", keep_roles) if roles else ffi.NULL
        c_contents = ffi.new("const char *[]", keep_contents) if contents else ffi.NULL
        c_template = ffi.new("char[]", template.encode()) if template is not None else ffi.NULL
        err = _lib.new_error_slot()
        out = ffi.new("char **")
        _lib.check(lib.newrllama_apply_chat_template(self._model, c_template, c_roles, c_contents, len(roles),
                                                     bool(add_assistant), out, err), err)
        return _lib.take_string(out[0]).decode("utf-8", "replace")

    def piece(self, token: int) -> bytes:
        """The bytes one token adds to a text (possibly part of a UTF-8 character); cached, since the
        scheduler asks for every token it samples."""
        piece = self._pieces.get(token)
        if piece is None:
            piece = self._pieces[token] = self.detokenize([token])
        return piece
