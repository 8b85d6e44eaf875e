"""OpenAI request bodies checked field by field and turned into prompts and SamplingParams.

Every problem is a BadRequest naming the field (OpenAI's 'param'), so a client gets a
400 that says what to fix; nothing here touches the model or the engine. A field we
cannot honour is refused rather than silently ignored (see request_fields)."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Dict, FrozenSet, List, Optional, Union

from ..errors import InvalidArgumentError
from ..engine.sampling.params import MAX_STOP, SamplingParams
from ..engine.sampling.sampling_table import FIELDS, SAMPLING_FIELDS, SamplingField
from .request_fields import CHAT_FIELDS, COMPLETION_FIELDS, MESSAGE_FIELDS, STREAM_OPTION_FIELDS, refused_field

MAX_PROMPTS = 256   # prompts (times n) in one request
MAX_N = 16
CHAT_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant"}


class BadRequest(Exception):
    def __init__(self, message: str, param: Optional[str] = None) -> None:
        super().__init__(message)
        self.message = message
        self.param = param


@dataclass(frozen=True)
class Job:
    """What one request asks for: prompts (text or token lists), each answered n times, with one params."""

    prompts: List[Union[str, List[int]]]
    n: int
    params: SamplingParams
    stream: bool
    include_usage: bool
    constraint_field: Optional[str] = None  # the field that holds its choices, grammar or response_format


def _sampling_field(body: Dict[str, Any], f: SamplingField) -> Any:
    """A sampling field of the request, by its request name, in the library's range (sampling_table)."""
    value = body.get(f.request_name)
    if value is None:
        return f.request_default
    if f.kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    why = f.problem(value)
    if why:
        raise BadRequest(f"'{f.request_name}' {why}", f.request_name)
    return value


def _integer(body: Dict[str, Any], name: str, low: int, high: int, default: Optional[int]) -> Optional[int]:
    value = body.get(name)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"'{name}' must be an integer, got {value!r}", name)
    if not low <= value <= high:
        raise BadRequest(f"'{name}' must be between {low} and {high}, got {value}", name)
    return value


def _text(value: Any, name: str) -> str:
    if not isinstance(value, str):
        raise BadRequest(f"'{name}' must be a string, got {type(value).__name__}", name)
    if "\0" in value:
        raise BadRequest(f"'{name}' contains a NUL character", name)
    return value


def _stop(body: Dict[str, Any]) -> List[str]:
    stop = body.get("stop")
    if stop is None:
        return []
    stops = [stop] if isinstance(stop, str) else stop
    if not isinstance(stops, list) or len(stops) > MAX_STOP:
        raise BadRequest(f"'stop' must be a string or a list of at most {MAX_STOP} strings", "stop")
    out = [_text(s, "stop") for s in stops]
    if any(not s for s in out):
        raise BadRequest("'stop' strings must not be empty", "stop")
    return out


def _constraint(body: Dict[str, Any]) -> Dict[str, Any]:
    """Our extensions (choices, grammar) and OpenAI's response_format, as SamplingParams arguments."""
    out: Dict[str, Any] = {}
    if body.get("choices") is not None:
        out["choices"] = body["choices"]
    if body.get("grammar") is not None:
        out["grammar"] = _text(body["grammar"], "grammar")
    fmt = body.get("response_format")
    if fmt is not None:
        kind = fmt.get("type") if isinstance(fmt, dict) else None
        if kind == "json_object":
            out["json_schema"] = {"type": "object"}
        elif kind == "json_schema":
            spec = fmt.get("json_schema")
            schema = spec.get("schema") if isinstance(spec, dict) else None
            if not isinstance(schema, dict):
                raise BadRequest("response_format 'json_schema' needs json_schema.schema, an object",
                                 "response_format")
            out["json_schema"] = schema
        elif kind != "text":
            raise BadRequest("response_format.type must be 'text', 'json_object' or 'json_schema'", "response_format")
    if len(out) > 1:
        raise BadRequest("give at most one of choices, grammar and response_format", "response_format")
    return out


def _constraint_field(body: Dict[str, Any]) -> Optional[str]:
    return next((name for name in ("choices", "grammar", "response_format") if body.get(name) is not None), None)


def _refuse_unread(body: Dict[str, Any], honoured: FrozenSet[str], param: Optional[str] = None, where: str = "") -> None:
    """Refuses the first field that is neither honoured nor harmless (param: the field reported instead)."""
    refused = refused_field(body, honoured)
    if refused is not None:
        name, why = refused
        raise BadRequest(f"{where}{why}", param or name)


def _job(body: Dict[str, Any], prompts: List[Union[str, List[int]]], max_tokens: int) -> Job:
    if body.get("model") is not None:
        _text(body["model"], "model")
    n = _integer(body, "n", 1, MAX_N, 1)
    stream = body.get("stream")
    if stream is not None and not isinstance(stream, bool):
        raise BadRequest("'stream' must be true or false", "stream")
    options = body.get("stream_options") or {}
    if not isinstance(options, dict) or not isinstance(options.get("include_usage", False), bool):
        raise BadRequest("'stream_options' must be an object with a boolean include_usage", "stream_options")
    _refuse_unread(options, STREAM_OPTION_FIELDS, "stream_options", "stream_options: ")
    stream = bool(stream)
    if stream and (len(prompts) > 1 or n > 1):
        raise BadRequest("streaming answers one prompt with n = 1", "stream")
    if len(prompts) * n > MAX_PROMPTS:
        raise BadRequest(f"at most {MAX_PROMPTS} answers per request (prompts times n)", "n")
    sampling = {f.name: _sampling_field(body, f) for f in SAMPLING_FIELDS if f.name != "max_tokens"}
    try:
        params = SamplingParams(max_tokens=max_tokens, stop=_stop(body), **sampling, **_constraint(body))
    except InvalidArgumentError as exc:  # the fields above are in range: a constraint's own check
        raise BadRequest(str(exc), _constraint_field(body)) from None
    return Job(prompts, n, params, stream, bool(options.get("include_usage", False)), _constraint_field(body))


def _max_tokens(body: Dict[str, Any], default: Optional[int], name: str = "max_tokens") -> Optional[int]:
    f = FIELDS["max_tokens"]
    return _integer(body, name, int(f.low), int(f.high), default)


def completion_job(body: Dict[str, Any], default_max_tokens: int) -> Job:
    """POST /v1/completions: prompt is a string, a list of strings, a token list or a list of token lists."""
    _refuse_unread(body, COMPLETION_FIELDS)
    prompt = body.get("prompt")
    if isinstance(prompt, str):
        prompts: List[Union[str, List[int]]] = [_text(prompt, "prompt")]
    elif isinstance(prompt, list) and prompt and all(isinstance(t, int) and not isinstance(t, bool) for t in prompt):
        prompts = [prompt]
    elif isinstance(prompt, list) and prompt:
        prompts = []
        for p in prompt:
            if isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
                prompts.append(p)
            else:
                prompts.append(_text(p, "prompt"))
    else:
        raise BadRequest("'prompt' must be a string, a list of strings or a list of token ids", "prompt")
    if len(prompts) > MAX_PROMPTS:
        raise BadRequest(f"at most {MAX_PROMPTS} prompts per request", "prompt")
    return _job(body, prompts, _max_tokens(body, default_max_tokens))  # type: ignore[arg-type]


def chat_messages(body: Dict[str, Any]) -> List[Dict[str, str]]:
    """POST /v1/chat/completions, first step (its fields checked): messages as role/content pairs for the
    chat template; content parts of type text are joined."""
    _refuse_unread(body, CHAT_FIELDS)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("'messages' must be a non-empty list", "messages")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or m.get("role") not in CHAT_ROLES:
            raise BadRequest(f"messages[{i}] must be an object with role one of {sorted(CHAT_ROLES)}", "messages")
        _refuse_unread(m, MESSAGE_FIELDS, "messages", f"messages[{i}]: ")
        content = m.get("content")
        if isinstance(content, list):
            if not all(isinstance(p, dict) and p.get("type") == "text" and set(p) <= {"type", "text"}
                       for p in content):
                raise BadRequest(f"messages[{i}].content parts must all be {{type: 'text', text}}", "messages")
            content = "".join(_text(p.get("text"), "messages") for p in content)
        out.append({"role": CHAT_ROLES[m["role"]], "content": _text(content, "messages")})
    return out


def chat_job(body: Dict[str, Any], prompt: str, default_max_tokens: int) -> Job:
    """POST /v1/chat/completions, once the messages are formatted into prompt by the model's template."""
    limit = _max_tokens(body, None, "max_completion_tokens")
    return _job(body, [prompt], _max_tokens(body, limit or default_max_tokens))  # type: ignore[arg-type]
