"""The worker of a cluster: a Ray actor that loads the model once and owns one Context.

It is an asyncio actor: chunks sent to it run at the same time and share the context's
batch (the next chunk's prompts join as the previous chunk's finish), and cancelling a
chunk's task from the driver cancels its prompts."""
from __future__ import annotations

import asyncio
import os
import socket
from typing import List, Optional, Sequence

from ..annotate import annotation_prompts, annotations
from ..annotation import Annotation
from ..codebook import check_codebook
from ..order_bias import DEFAULT_DEBIAS, base_order
from ..context import Context
from ..model import Model
from ..model_hash import ModelIdentity
from ..params import SamplingParams
from ..parallel import ParamsArg, Prompt
from ..results import Completion


class Worker:
    def __init__(self, model: Optional[str], n_ctx: int, n_seq_max: int, n_threads: int) -> None:
        self.model = Model(model)
        try:
            self.context = Context(self.model, n_ctx=n_ctx, n_seq_max=n_seq_max, n_threads=n_threads)
        except BaseException:
            self.model.close()
            raise

    async def info(self) -> dict:
        return {"pid": os.getpid(), "host": socket.gethostname(), "model": self.model.path,
                "n_threads": self.context.n_threads, "n_seq_max": self.context.n_seq_max,
                "n_ctx": self.context.n_ctx}

    async def model_identity(self) -> ModelIdentity:
        # The first time, hashing reads the whole file: off the event loop, so that the actor stays responsive.
        return await asyncio.to_thread(self.model.identity)

    async def apply_chat_template(self, conversations: Sequence[Sequence[dict]]) -> List[str]:
        return [self.model.apply_chat_template(messages) for messages in conversations]

    async def generate_parallel(self, prompts: Sequence[Prompt], params: ParamsArg) -> List[Completion]:
        return await self.context.agenerate_parallel(prompts, params)

    async def annotate(self, texts: Sequence[Optional[str]], labels: Sequence[str],
                       instruction: str) -> List[Annotation]:
        book = check_codebook(labels, instruction)
        jobs, prompts = annotation_prompts(self.model, texts, book, DEFAULT_DEBIAS)
        done = (await self.context.agenerate_parallel(prompts, SamplingParams(choices=jobs[0][1]))
                if prompts else [])
        return annotations(len(texts), book.labels, DEFAULT_DEBIAS, jobs, done, base_order(DEFAULT_DEBIAS, book.labels))
