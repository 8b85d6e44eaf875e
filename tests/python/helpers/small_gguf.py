"""Small GGUF files for the download tests, written by hand (not by the code under test): a header
with one metadata value and one tensor, padding to 32 bytes, then the tensor's random data."""
from __future__ import annotations

import os
import struct

F32 = 0
UNKNOWN_TYPE = 250  # a ggml type number that does not exist


def _string(text: str) -> bytes:
    return struct.pack("<Q", len(text)) + text.encode()


def small_gguf(size: int, tensor_type: int = F32) -> bytes:
    """A GGUF file of exactly ``size`` bytes (a multiple of 32) whose one tensor's data ends the file."""
    def header(n_values: int) -> bytes:
        return (b"GGUF" + struct.pack("<IQQ", 3, 1, 1)
                + _string("general.name") + struct.pack("<I", 8) + _string("small")
                + _string("data") + struct.pack("<IQIQ", 1, n_values, tensor_type, 0))
    start = -(-len(header(0)) // 32) * 32
    head = header((size - start) // 4)
    return head + b"\0" * (start - len(head)) + os.urandom(size - start)
