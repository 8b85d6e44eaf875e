"""The server's routes: OpenAI's /v1/models, /v1/completions and /v1/chat/completions, and /health and /metrics.

Each route names what it needs as a FastAPI dependency: the server's state (ServerState: settings, engine,
counters), and for the OpenAI routes a context that is ready and a caller with the API key (ready_context).
Handlers never decode: they check the request, submit its prompts to the context's scheduler and await the
answers (the engine thread resolves them in the event loop), so any number of requests share the running
batch."""
from __future__ import annotations

import asyncio
import secrets
from typing import Any, Callable, Dict, Optional

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse

from ..engine.calls.context import Context
from ..errors import GenerationError, NewrllamaError
from .api_errors import RETRY_SOON, ApiError, library_error, prompt_failure
from .http_io import read_json, unless_disconnected
from .openai_request import BadRequest, Job, chat_job, chat_messages, completion_job
from .openai_response import Answers, ChunkWriter, chat_body, completion_body, usage
from .served_engine import ServerState

COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions

router = APIRouter()


def server_state(request: Request) -> ServerState:
    return request.app.state.server


def ready_context(request: Request, state: ServerState = Depends(server_state)) -> Context:
    """The context, for a caller with the API key (if the server has one) once the model is loaded."""
    key = state.config.api_key
    if key is not None:
        given = request.headers.get("authorization", "")
        if not secrets.compare_digest(given.encode(), f"Bearer {key}".encode()):
            raise ApiError(401, "a valid API key is needed (Authorization: Bearer ...)", "authentication_error")
    engine = state.engine
    if engine.error is not None:
        raise ApiError(500, f"the model could not be loaded: {engine.error}", "server_error")
    if engine.ctx is None:
        raise ApiError(503, "the model is still loading", "server_error", headers=RETRY_SOON)
    return engine.ctx


@router.get("/health")
async def health(state: ServerState = Depends(server_state)) -> JSONResponse:
    if state.engine.error is not None:
        return JSONResponse({"status": "error", "error": state.engine.error}, 500)
    if state.engine.ctx is None:
        return JSONResponse({"status": "loading"}, 503, headers=RETRY_SOON)
    return JSONResponse({"status": "ok"})


@router.get("/metrics")
async def prometheus(state: ServerState = Depends(server_state)) -> PlainTextResponse:
    ctx = state.engine.ctx
    if ctx is None:
        raise ApiError(503, "the model is still loading", "server_error", headers=RETRY_SOON)
    # Reading the KV cache waits for the running step: not in the event loop's thread.
    cells = await asyncio.get_running_loop().run_in_executor(None, ctx.n_used_cells)
    return PlainTextResponse(state.metrics.render(ctx.engine_stats(), cells), media_type="text/plain; version=0.0.4")


@router.get("/v1/models", dependencies=[Depends(ready_context)])
async def models(state: ServerState = Depends(server_state)) -> Dict[str, Any]:
    engine = state.engine
    return {"object": "list", "data": [{"id": engine.name, "object": "model", "created": engine.created,
                                        "owned_by": "newrllama"}]}


@router.post("/v1/completions")
async def completions(request: Request, state: ServerState = Depends(server_state),
                      ctx: Context = Depends(ready_context)) -> Response:
    body = await read_json(request, state.config.max_body_bytes)
    return await answer(request, state, ctx, lambda: completion_job(body, COMPLETION_DEFAULT_MAX_TOKENS), chat=False)


@router.post("/v1/chat/completions")
async def chat_completions(request: Request, state: ServerState = Depends(server_state),
                           ctx: Context = Depends(ready_context)) -> Response:
    body = await read_json(request, state.config.max_body_bytes)

    def job() -> Job:
        messages = chat_messages(body)
        try:
            prompt = ctx.model.apply_chat_template(messages)
        except NewrllamaError as exc:
            raise BadRequest(f"the messages cannot be formatted: {exc}", "messages") from None
        return chat_job(body, prompt, ctx.n_ctx_seq)

    return await answer(request, state, ctx, job, chat=True)


async def answer(request: Request, state: ServerState, ctx: Context, make_job: Callable[[], Job],
                 chat: bool) -> Response:
    try:
        job = make_job()
    except BadRequest as exc:
        raise ApiError(400, exc.message, param=exc.param) from None
    metrics, config = state.metrics, state.config
    if metrics.in_flight >= config.n_seq_max + config.max_queue:
        raise ApiError(503, "the server is busy: too many requests are waiting", "server_error", headers=RETRY_SOON)
    metrics.in_flight += 1
    if job.stream:
        return await stream_answer(request, state, ctx, job, chat)  # in_flight ends with the stream
    try:
        prompts = [p for p in job.prompts for _ in range(job.n)]
        done = Answers(await unless_disconnected(request, ctx.agenerate_parallel(prompts, job.params)), job.n)
    except NewrllamaError as exc:  # InvalidArgumentError here: a grammar over a bound or that does not parse
        raise library_error(exc, job.constraint_field) from None
    finally:
        metrics.in_flight -= 1
    failed = [(i, c) for i, c in enumerate(done) if c.finish_reason == "error"]
    if failed:
        i, completion = failed[0]
        raise prompt_failure(i // job.n, completion, "messages" if chat else "prompt")
    metrics.served(usage(done))
    return JSONResponse((chat_body if chat else completion_body)(done, state.engine.name))


async def stream_answer(request: Request, state: ServerState, ctx: Context, job: Job, chat: bool) -> Response:
    metrics = state.metrics
    try:
        stream = ctx.astream(job.prompts[0], job.params)
    except NewrllamaError as exc:
        metrics.in_flight -= 1
        raise library_error(exc, job.constraint_field) from None
    try:
        first: Optional[str] = await unless_disconnected(request, stream.__anext__())
    except StopAsyncIteration:
        first = None
    except BaseException as exc:
        metrics.in_flight -= 1
        await stream.aclose()
        if isinstance(exc, GenerationError):  # the prompt failed: stream.completion says whose failure it was
            raise prompt_failure(0, stream.completion, "messages" if chat else "prompt") from None
        raise
    writer = ChunkWriter(chat, state.engine.name)

    async def events():
        try:
            yield writer.start()
            if first:
                yield writer.piece(first)
            async for piece in stream:
                yield writer.piece(piece)
            done = stream.completion
            metrics.served(usage(Answers([done], 1)))
            yield writer.end(done, job.include_usage)
        except GenerationError:
            error = prompt_failure(0, stream.completion, "messages" if chat else "prompt")
            yield writer.error(error.message, error.kind)
        finally:
            metrics.in_flight -= 1
            await stream.aclose()

    return StreamingResponse(events(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
