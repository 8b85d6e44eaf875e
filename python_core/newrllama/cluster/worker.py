"""The worker of a cluster: a Ray actor that loads the model once and owns one Context.

It is an asyncio actor: chunks sent to it run at the same time and share the context's
batch (the next chunk's prompts join as the previous chunk's finish), and cancelling a
chunk's task from the driver cancels its prompts."""
from __future__ import annotations

import asyncio
import os
import socket
import warnings
from typing import Any, List, Optional, Sequence

from ..labels.annotate import label_texts
from ..labels.annotation_task import AnnotationTask
from ..engine.calls.context import Context
from ..errors import AnnotationWarning
from ..engine.llama.model import Model
from ..models.model_hash import ModelIdentity
from ..engine.calls.parallel import ParamsArg, Prompt
from ..engine.step.results import Completion


class Worker:
    def __init__(self, model: Optional[str], n_ctx: int, n_seq_max: int, n_threads: int) -> None:
        self.model = Model(model)
        try:
            self.context = Context(self.model, n_ctx=n_ctx, n_seq_max=n_seq_max, n_threads=n_threads)
        except BaseException:
            self.model.close()
            raise

    async def info(self) -> dict:
        stats = self.context.engine_stats()
        return {"pid": os.getpid(), "host": socket.gethostname(), "model": self.model.path,
                "n_threads": self.context.n_threads, "n_seq_max": self.context.n_seq_max,
                "n_ctx": self.context.n_ctx, "n_running": stats.n_running, "n_waiting": stats.n_waiting}

    async def model_identity(self) -> ModelIdentity:
        # The first time, hashing reads the whole file: off the event loop, so that the actor stays responsive.
        return await asyncio.to_thread(self.model.identity)

    async def apply_chat_template(self, conversations: Sequence[Sequence[dict]]) -> List[str]:
        return [self.model.apply_chat_template(messages) for messages in conversations]

    async def generate_parallel(self, prompts: Sequence[Prompt], params: ParamsArg) -> List[Completion]:
        return await self.context.agenerate_parallel(prompts, params)

    async def annotate(self, texts: Sequence[Optional[str]], task: AnnotationTask) -> List[Any]:
        """annotate() on this worker's context, in a thread (the context is shared with the chunks running beside
        it); the driver judges the whole call's labels, so a chunk's suspect labels do not warn here."""
        def run() -> List[Any]:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", AnnotationWarning)
                return label_texts(texts, task, context=self.context)

        return await asyncio.to_thread(run)
