"""Which fields of a request the server reads, which it takes as changing nothing, and which it refuses.

A field of a request body (or of a chat message) is, by its name:

- honoured: read and acted on (``COMPLETION_FIELDS``, ``CHAT_FIELDS``, ``MESSAGE_FIELDS``);
- harmless metadata, which says who asks or tags the request and changes no answer
  (``METADATA``: ``user``, ``safety_identifier``, ``metadata``), checked for its type only;
- a feature of OpenAI's API that we do not implement, accepted only with the value that
  changes nothing (``NO_OP``: ``best_of`` 1, ``echo`` false, ``tools`` [], ``logprobs``
  false, ``tool_choice`` "none", ``store`` false, ``service_tier`` "auto" ...).

Anything else is refused with a 400 naming the field, OpenAI's fields we do not implement
(``audio``, ``prediction``, ``parallel_tool_calls``, ``reasoning_effort`` ...) and names
OpenAI does not have alike: a client that asks for something must not get an answer that
silently lacks it. null is absent, for every field, as OpenAI reads it.
"""
from __future__ import annotations

import json
from typing import Any, Dict, FrozenSet, Optional, Tuple

from ..engine.sampling.sampling_table import SAMPLING_FIELDS

# The sampling table's fields, under the names a request gives them (OpenAI's, else llama-server's).
SAMPLING_REQUEST_FIELDS = frozenset(f.request_name for f in SAMPLING_FIELDS)
COMMON_FIELDS = SAMPLING_REQUEST_FIELDS | {
    "model",  # any name: the one loaded model answers, under its own name
    "n", "stream", "stream_options", "stop", "response_format",
    "choices", "grammar",  # ours, as llama-server's
}
COMPLETION_FIELDS = COMMON_FIELDS | {"prompt"}
CHAT_FIELDS = COMMON_FIELDS | {"messages", "max_completion_tokens"}
MESSAGE_FIELDS = frozenset({"role", "content"})
STREAM_OPTION_FIELDS = frozenset({"include_usage"})

METADATA: Dict[str, type] = {"user": str, "safety_identifier": str, "metadata": dict}

NO_OP: Dict[str, Tuple[Any, ...]] = {
    "best_of": (1,), "echo": (False,), "suffix": ("",), "logprobs": (False,), "top_logprobs": (0,),
    "logit_bias": ({},), "presence_penalty": (0,), "frequency_penalty": (0,),
    "tools": ([],), "functions": ([],), "tool_choice": ("none",), "function_call": ("none",),
    "modalities": (["text"],), "store": (False,), "service_tier": ("auto", "default"),
    # in a chat message, as a client replays an answer it received
    "tool_calls": ([],), "annotations": ([],),
    # in stream_options: the chunks are not padded
    "include_obfuscation": (False,),
}
HINTS = {"presence_penalty": "use repeat_penalty", "frequency_penalty": "use repeat_penalty"}


def _same(value: Any, no_op: Any) -> bool:
    """Equal, and both booleans or neither (so that true is not 1 and 0 is not false)."""
    return isinstance(value, bool) == isinstance(no_op, bool) and value == no_op


def refused_field(body: Dict[str, Any], honoured: FrozenSet[str]) -> Optional[Tuple[str, str]]:
    """The first field of body that the server neither honours nor may ignore, and why; None if there is none."""
    for name, value in body.items():
        if value is None or name in honoured:
            continue
        if name in METADATA:
            if not isinstance(value, METADATA[name]):
                return name, f"'{name}' must be a {'string' if METADATA[name] is str else 'JSON object'}"
            continue
        no_op = NO_OP.get(name)
        if no_op is not None and any(_same(value, v) for v in no_op):
            continue
        why = f"'{name}' is not supported by this server"
        if no_op:
            why += f" (only {' or '.join(json.dumps(v) for v in no_op)}, which change nothing, or null)"
        if name in HINTS:
            why += f"; {HINTS[name]}"
        return name, why
    return None
