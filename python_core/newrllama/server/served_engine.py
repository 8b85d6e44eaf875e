"""What the server serves: its settings and the model with its context, loaded in a thread so that /health can
answer 503 meanwhile; and the server's state that every route reads (ServerState)."""
from __future__ import annotations

import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from ..engine.calls.context import Context
from ..engine.llama.model import Model
from ..errors import NewrllamaError
from ..models.catalog import is_model_name
from .metrics import ServerMetrics


@dataclass(frozen=True)
class ServerConfig:
    model_path: Optional[str] = None  # None: the embedded model
    n_seq_max: int = 16
    n_ctx: Optional[int] = None       # None: 2048 per sequence
    n_threads: Optional[int] = None
    api_key: Optional[str] = None
    max_queue: int = 256              # requests waiting beyond the n_seq_max running ones
    max_body_bytes: int = 8 * 1024 * 1024
    model_name: Optional[str] = None
    prefix_cache: bool = True         # False: nothing shared between requests (see Context)
    batch_invariant: bool = True      # a request's bits do not depend on the others (see Context)


class Engine:
    """The model and its context, loaded in a thread so that /health can answer 503 meanwhile."""

    def __init__(self, config: ServerConfig) -> None:
        self.config = config
        self.model: Optional[Model] = None
        self.ctx: Optional[Context] = None
        self.error: Optional[str] = None
        # a recommended model's name is its id as it is (its dots are not a file's suffix), a file its stem
        path = config.model_path or "gemma-3-270m"
        self.name = config.model_name or (path if is_model_name(path) else Path(path).stem)
        self.created = int(time.time())
        self._thread = threading.Thread(target=self._load, name="newrllama-load", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def _load(self) -> None:
        c = self.config
        try:
            model = Model(c.model_path)
            self.ctx = Context(model, n_ctx=c.n_ctx or 2048 * c.n_seq_max, n_seq_max=c.n_seq_max,
                               n_threads=c.n_threads, prefix_cache=c.prefix_cache,
                               batch_invariant=c.batch_invariant)
            self.model = model
        except NewrllamaError as exc:
            self.error = str(exc)
            print(f"newrllama: error: the model could not be loaded: {exc}", file=sys.stderr, flush=True)

    def close(self) -> None:
        self._thread.join()
        if self.ctx is not None:
            self.ctx.close()
        if self.model is not None:
            self.model.close()


@dataclass
class ServerState:
    """One server's settings, engine and counters: the routes' dependencies (app.state.server)."""

    config: ServerConfig
    engine: Engine
    metrics: ServerMetrics = field(default_factory=ServerMetrics)
