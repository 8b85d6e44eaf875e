"""The sampling parameters' one table: name, type, default and range, and the OpenAI server's name and default
where the OpenAI API differs by design (with the reason). SamplingParams, the server and the command line read
it; tests hold the C checks and the R signatures to it."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple, Union

from ...errors import InvalidArgumentError

INT32_MAX = 2**31 - 1
MAX_SEED = 2**32 - 1

Number = Union[int, float]


@dataclass(frozen=True)
class SamplingField:
    name: str
    kind: type                      # int or float
    default: Number
    low: Number
    high: Number                    # math.inf: any finite number
    low_open: bool = False          # the low end itself refused
    server_name: Optional[str] = None  # the OpenAI request's name, when it differs
    server_default: Optional[Number] = None  # the server's default, when it differs (None: the library's)
    server_why: str = ""

    @property
    def request_name(self) -> str:
        return self.server_name or self.name

    @property
    def request_default(self) -> Number:
        return self.default if self.server_default is None else self.server_default

    def range_text(self) -> str:
        if self.high == math.inf:
            return f"a finite number {'>' if self.low_open else '>='} {self.low}"
        return f"in {'(' if self.low_open else '['}{self.low}, {self.high}]"

    def problem(self, value: object) -> Optional[str]:
        """Why value is not a valid setting (None if it is)."""
        if self.kind is int:
            if isinstance(value, bool) or not isinstance(value, int):
                return f"must be an int, got {type(value).__name__}"
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            return f"must be a number, got {type(value).__name__}"
        if not math.isfinite(value) or value < self.low or value > self.high or (self.low_open and value == self.low):
            return f"must be {self.range_text()}, got {value}"
        return None

    def check(self, value: object) -> None:
        why = self.problem(value)
        if why:
            raise InvalidArgumentError(f"{self.name} {why}")


SAMPLING_FIELDS: Tuple[SamplingField, ...] = (
    SamplingField("max_tokens", int, 100, 1, INT32_MAX,
                  server_why="the server's default is its --max-tokens setting"),
    SamplingField("temperature", float, 0.0, 0.0, math.inf, server_default=1.0,
                  server_why="OpenAI's default: a client that sends no temperature expects sampled answers"),
    SamplingField("top_k", int, 40, 0, INT32_MAX),
    SamplingField("top_p", float, 1.0, 0.0, 1.0),
    SamplingField("min_p", float, 0.0, 0.0, 1.0),
    # The penalty reads the last repeat_last_n tokens (-1: the whole sequence); 64 as llama.cpp, so that a
    # penalty given alone takes effect. At penalty_repeat 1 nothing is applied.
    SamplingField("repeat_last_n", int, 64, -1, INT32_MAX),
    SamplingField("penalty_repeat", float, 1.0, 0.0, math.inf, low_open=True, server_name="repeat_penalty",
                  server_why="llama-server's name for it"),
    # -1: a random seed.
    SamplingField("seed", int, 1234, -1, MAX_SEED, server_default=-1,
                  server_why="OpenAI's default: without a seed, answers vary from request to request"),
)

FIELDS = {f.name: f for f in SAMPLING_FIELDS}
