"""OpenAI response objects: completions, chat completions, their stream chunks, usage, errors."""
from __future__ import annotations

import json
import secrets
import time
from typing import Any, Dict, List, Optional

from ..engine.step.results import Completion


def new_id(prefix: str) -> str:
    return f"{prefix}-{secrets.token_hex(12)}"


def error_body(message: str, kind: str = "invalid_request_error", param: Optional[str] = None,
               code: Optional[str] = None) -> Dict[str, Any]:
    return {"error": {"message": message, "type": kind, "param": param, "code": code}}


class Answers(list):
    """Completions of one request in OpenAI's order (prompt by prompt, n answers each), knowing n."""

    def __init__(self, completions: List[Completion], n: int) -> None:
        super().__init__(completions)
        self.n = n


def usage(answers: Answers) -> Dict[str, Any]:
    """Token counts of a request; a prompt answered n times counts once, as OpenAI counts it."""
    firsts = answers[::answers.n]
    prompt = sum(c.n_prompt_tokens for c in firsts)
    generated = sum(c.n_gen_tokens for c in answers)
    return {"prompt_tokens": prompt, "completion_tokens": generated, "total_tokens": prompt + generated,
            "prompt_tokens_details": {"cached_tokens": sum(c.n_cached_tokens for c in firsts)}}


def _choice_extras(c: Completion) -> Dict[str, Any]:
    return {"choice_probs": c.choice_probs} if c.choice_probs is not None else {}


def completion_body(answers: Answers, model: str) -> Dict[str, Any]:
    return {"id": new_id("cmpl"), "object": "text_completion", "created": int(time.time()), "model": model,
            "choices": [{"text": c.text, "index": i, "logprobs": None, "finish_reason": c.finish_reason,
                         **_choice_extras(c)} for i, c in enumerate(answers)],
            "usage": usage(answers)}


def chat_body(answers: Answers, model: str) -> Dict[str, Any]:
    return {"id": new_id("chatcmpl"), "object": "chat.completion", "created": int(time.time()), "model": model,
            "choices": [{"index": i, "message": {"role": "assistant", "content": c.text},
                         "logprobs": None, "finish_reason": c.finish_reason, **_choice_extras(c)}
                        for i, c in enumerate(answers)],
            "usage": usage(answers)}


class ChunkWriter:
    """Server-sent events of one streamed answer, in the completions or the chat shape."""

    def __init__(self, chat: bool, model: str) -> None:
        self.chat = chat
        self.head = {"id": new_id("chatcmpl" if chat else "cmpl"),
                     "object": "chat.completion.chunk" if chat else "text_completion",
                     "created": int(time.time()), "model": model}

    def _event(self, choices: List[Dict[str, Any]], **extra: Any) -> bytes:
        return b"data: " + json.dumps({**self.head, "choices": choices, **extra}).encode() + b"\n\n"

    def _choice(self, text: Optional[str], finish_reason: Optional[str], role: bool = False) -> Dict[str, Any]:
        if self.chat:
            delta: Dict[str, Any] = {"role": "assistant"} if role else {}
            if text is not None:
                delta["content"] = text
            return {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}
        return {"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish_reason}

    def start(self) -> bytes:
        """The chat stream's first chunk gives the role (as OpenAI's does); completions start with text."""
        return self._event([self._choice("", None, role=True)]) if self.chat else b""

    def piece(self, text: str) -> bytes:
        return self._event([self._choice(text, None)])

    def end(self, done: Completion, include_usage: bool) -> bytes:
        out = self._event([{**self._choice(None if self.chat else "", done.finish_reason), **_choice_extras(done)}])
        if include_usage:
            out += self._event([], usage=usage(Answers([done], 1)))
        return out + b"data: [DONE]\n\n"

    @staticmethod
    def error(message: str, kind: str) -> bytes:
        return b"data: " + json.dumps(error_body(message, kind)).encode() + b"\n\ndata: [DONE]\n\n"
