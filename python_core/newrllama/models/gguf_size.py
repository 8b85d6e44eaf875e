"""The size a GGUF file must have, read from its header: where the data of its last tensor ends; and the
tensors the header lists, sized (the benchmarks count the bytes and multiply-adds a token takes from them); and the
metadata keys it holds (whether the file has a chat template).

A GGUF file is a header (metadata key-values, then one entry per tensor: name, shape, type and
offset), padding up to the alignment, then the tensors' data. The header alone says how long
the file must be, so a shorter file is cut, whatever a server said about its length."""
from __future__ import annotations

import functools
import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, List, Optional, Set, Tuple, TypeVar

# ggml type -> (values per block, bytes per block), as ggml_blck_size() and ggml_type_size() of
# the libggml of the pinned llama-cpp-python gives them.
_BLOCKS: Dict[int, Tuple[int, int]] = {
    0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34), 9: (32, 36),
    10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176), 14: (256, 210), 15: (256, 292),
    16: (256, 66), 17: (256, 74), 18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
    23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56), 30: (1, 2),
    34: (256, 54), 35: (256, 66), 39: (32, 17), 40: (64, 36), 41: (128, 18), 42: (64, 18),
}
# metadata value type -> bytes, for the fixed-size ones
_SCALAR_BYTES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY, _UINT32 = 8, 9, 4
_DEFAULT_ALIGNMENT = 32
_U32, _U64 = struct.Struct("<I"), struct.Struct("<Q")
T = TypeVar("T")


@dataclass(frozen=True)
class GgufTensor:
    """One tensor as the header describes it."""

    name: str
    shape: Tuple[int, ...]  # ggml's order: shape[0] is the length of a row
    ggml_type: int
    offset: int   # from the start of the data, past the header's padding
    n_bytes: int

    @property
    def n_elements(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


class _PastEnd(Exception):
    """The header goes on past the end of the file: it needs at least ``needed`` bytes."""

    def __init__(self, needed: int) -> None:
        super().__init__(needed)
        self.needed = needed


class _Unknown(Exception):
    """The header holds something this module cannot size (a version, value type or tensor type)."""


class _Header:
    def __init__(self, data) -> None:
        self.data, self.at = data, 0

    def skip(self, n: int) -> int:
        start, self.at = self.at, self.at + n
        if self.at > len(self.data):
            raise _PastEnd(self.at)
        return start

    def u32(self) -> int:
        return _U32.unpack_from(self.data, self.skip(4))[0]

    def u64(self) -> int:
        return _U64.unpack_from(self.data, self.skip(8))[0]

    def string(self) -> bytes:
        n = self.u64()
        start = self.skip(n)
        return bytes(self.data[start:start + n])

    def skip_value(self, kind: int) -> None:
        if kind in _SCALAR_BYTES:
            self.skip(_SCALAR_BYTES[kind])
        elif kind == _STRING:
            self.skip(self.u64())
        elif kind == _ARRAY:
            item, count = self.u32(), self.u64()
            if item in _SCALAR_BYTES:
                self.skip(count * _SCALAR_BYTES[item])
            elif item == _STRING:
                for _ in range(count):  # each string takes 8 bytes or more, so a bogus count soon runs past the end
                    self.skip(self.u64())
            else:
                raise _Unknown(f"metadata arrays of type {item}")
        else:
            raise _Unknown(f"metadata type {kind}")


def required_size(path: Path) -> Optional[int]:
    """The least size the GGUF file at ``path`` must have to hold all its tensors' data: more than
    its actual size when it is cut (in its header too); None when this module cannot tell (a GGUF
    version, metadata or tensor type it does not know)."""
    try:
        tensors, data_start = _read_header(path, _parse)
    except _PastEnd as cut:
        return cut.needed
    except _Unknown:
        return None
    return data_start + max((t.offset + t.n_bytes for t in tensors), default=0)


def gguf_tensors(path: Path) -> List[GgufTensor]:
    """The tensors of the GGUF file at ``path``; ValueError where its header is cut or holds a type this module
    cannot size."""
    try:
        return _read_header(path, _parse)[0]
    except (_PastEnd, _Unknown) as e:
        raise ValueError(f"{path}: cannot read the tensors of its GGUF header ({type(e).__name__} {e})") from e


def gguf_keys(path: Path) -> Set[str]:
    """The metadata keys of the GGUF file at ``path``; ValueError where its header is cut or holds a value type
    this module cannot skip."""
    try:
        return _read_header(path, _keys)
    except (_PastEnd, _Unknown) as e:
        raise ValueError(f"{path}: cannot read the metadata of its GGUF header ({type(e).__name__} {e})") from e


def has_chat_template(path: Path) -> bool:
    """Whether the GGUF file has a chat template of its own: an instruct (chat) model's does, a base model's not.
    A header this module cannot walk counts as having one (llama.cpp loaded it; nothing to warn of). Read once per
    version of the file: walking a header of 150,000 token strings takes a noticeable part of a short call."""
    version = os.stat(path)
    return _has_chat_template(os.fspath(path), version.st_size, version.st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _has_chat_template(path: str, size: int, mtime_ns: int) -> bool:
    try:
        return "tokenizer.chat_template" in gguf_keys(Path(path))
    except ValueError:
        return True


def _read_header(path: Path, parse: Callable[[_Header], T]) -> T:
    """What ``parse`` reads from the header."""
    with open(path, "rb") as f:
        size = f.seek(0, 2)
        data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
    try:
        return parse(_Header(data))
    finally:
        if isinstance(data, mmap.mmap):
            data.close()


def _counts(header: _Header) -> Tuple[int, int]:
    """(tensors, metadata values), past the magic (checked by the caller) and the version."""
    header.skip(4)
    if header.u32() not in (2, 3):  # version 1 had 32-bit counts; llama.cpp no longer reads it
        raise _Unknown("GGUF version")
    return header.u64(), header.u64()


def _keys(header: _Header) -> Set[str]:
    keys = set()
    for _ in range(_counts(header)[1]):
        keys.add(header.string().decode("utf-8", "replace"))
        header.skip_value(header.u32())
    return keys


def _parse(header: _Header) -> Tuple[List[GgufTensor], int]:
    """The tensors, and where their data starts (the end of the header when there are none)."""
    n_tensors, n_values = _counts(header)
    alignment = _DEFAULT_ALIGNMENT
    for _ in range(n_values):
        key, kind = header.string(), header.u32()
        if key == b"general.alignment" and kind == _UINT32:
            alignment = header.u32() or _DEFAULT_ALIGNMENT
        else:
            header.skip_value(kind)
    tensors = []
    for _ in range(n_tensors):
        name = header.string().decode("utf-8", "replace")
        shape = tuple(header.u64() for _ in range(header.u32()))
        kind, offset = header.u32(), header.u64()
        if kind not in _BLOCKS:
            raise _Unknown(f"tensor type {kind}")
        per_block, block_bytes = _BLOCKS[kind]
        rows = 1
        for n in shape[1:]:
            rows *= n
        tensors.append(GgufTensor(name, shape, kind, offset, (shape[0] if shape else 1) // per_block * block_bytes * rows))
    if not tensors:
        return tensors, header.at
    return tensors, -(-header.at // alignment) * alignment
