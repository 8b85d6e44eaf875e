"""The FastAPI application: OpenAI routes over one Context, whose engine thread batches every request.

Handlers never decode: they check the request, submit its prompts to the context's
scheduler and await the answers (the engine thread resolves them in the event loop),
so any number of requests share the running batch. A client that goes away has its
prompts cancelled at once; a full queue answers 503 with Retry-After."""
from __future__ import annotations

import asyncio
import json
import secrets
import sys
import threading
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Awaitable, Dict, Optional, TypeVar

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.exceptions import HTTPException

from ..engine.context import Context
from ..errors import GenerationError, NewrllamaError
from ..engine.model import Model
from .api_errors import RETRY_SOON, ApiError, library_error, prompt_failure
from .metrics import ServerMetrics
from .openai_request import BadRequest, Job, chat_job, chat_messages, completion_job
from .openai_response import Answers, ChunkWriter, chat_body, completion_body, error_body, usage

T = TypeVar("T")
COMPLETION_DEFAULT_MAX_TOKENS = 16  # OpenAI's default for /v1/completions
ROUTES = {"/health", "/metrics", "/v1/models", "/v1/completions", "/v1/chat/completions"}


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
        self.name = config.model_name or Path(config.model_path or "gemma-3-270m").stem
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


class ClientGone(Exception):
    pass


async def unless_disconnected(request: Request, work: Awaitable[T]) -> T:
    """Awaits work, cancelling it (and so its prompts) as soon as the client disconnects."""
    task = asyncio.ensure_future(work)
    try:
        while True:
            done, _ = await asyncio.wait({task}, timeout=0.25)
            if done:
                return task.result()
            if await request.is_disconnected():
                raise ClientGone()
    finally:
        if not task.done():
            task.cancel()


async def read_json(request: Request, limit: int) -> Dict[str, Any]:
    declared = request.headers.get("content-length")
    if declared is not None and (not declared.isdigit() or int(declared) > limit):
        raise ApiError(413, f"the request body is larger than {limit} bytes")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise ApiError(413, f"the request body is larger than {limit} bytes")
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        raise ApiError(400, "the request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise ApiError(400, "the request body must be a JSON object")
    return data


class CountRequests:
    """ASGI middleware counting answered requests by route and status (unknown paths as 'other')."""

    def __init__(self, app, metrics: ServerMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = scope["path"] if scope["path"] in ROUTES else "other"

        async def counting_send(message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.requests[(route, message["status"])] += 1
            await send(message)

        await self.app(scope, receive, counting_send)


def create_app(config: ServerConfig) -> FastAPI:
    engine = Engine(config)
    metrics = ServerMetrics()

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        engine.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, engine.close)

    app = FastAPI(title="newrllama", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.engine = engine  # for in-process callers (tests) that reach the context

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.message, exc.kind, exc.param), exc.status, headers=exc.headers)

    @app.exception_handler(HTTPException)
    async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
        return JSONResponse(error_body(str(exc.detail), "invalid_request_error"), exc.status_code,
                            headers=getattr(exc, "headers", None))

    @app.exception_handler(Exception)
    async def internal_error(request: Request, exc: Exception) -> JSONResponse:
        return JSONResponse(error_body(f"internal error: {exc!r}", "server_error"), 500)

    @app.exception_handler(ClientGone)
    async def client_gone(request: Request, exc: ClientGone) -> Response:
        return Response(status_code=499)  # nobody reads it; nginx's code for a client that went away

    app.add_middleware(CountRequests, metrics=metrics)

    def ready_context(request: Request) -> Context:
        if config.api_key is not None:
            given = request.headers.get("authorization", "")
            if not secrets.compare_digest(given.encode(), f"Bearer {config.api_key}".encode()):
                raise ApiError(401, "a valid API key is needed (Authorization: Bearer ...)", "authentication_error")
        if engine.error is not None:
            raise ApiError(500, f"the model could not be loaded: {engine.error}", "server_error")
        if engine.ctx is None:
            raise ApiError(503, "the model is still loading", "server_error", headers=RETRY_SOON)
        return engine.ctx

    @app.get("/health")
    async def health() -> JSONResponse:
        if engine.error is not None:
            return JSONResponse({"status": "error", "error": engine.error}, 500)
        if engine.ctx is None:
            return JSONResponse({"status": "loading"}, 503, headers=RETRY_SOON)
        return JSONResponse({"status": "ok"})

    @app.get("/metrics")
    async def prometheus() -> PlainTextResponse:
        ctx = engine.ctx
        if ctx is None:
            raise ApiError(503, "the model is still loading", "server_error", headers=RETRY_SOON)
        # Reading the KV cache waits for the running step: not in the event loop's thread.
        cells = await asyncio.get_running_loop().run_in_executor(None, ctx.n_used_cells)
        return PlainTextResponse(metrics.render(ctx.engine_stats(), cells), media_type="text/plain; version=0.0.4")

    @app.get("/v1/models")
    async def models(request: Request) -> Dict[str, Any]:
        ready_context(request)
        return {"object": "list", "data": [{"id": engine.name, "object": "model", "created": engine.created,
                                            "owned_by": "newrllama"}]}

    @app.post("/v1/completions")
    async def completions(request: Request) -> Response:
        ctx = ready_context(request)
        body = await read_json(request, config.max_body_bytes)
        return await answer(request, ctx, lambda: completion_job(body, COMPLETION_DEFAULT_MAX_TOKENS), chat=False)

    @app.post("/v1/chat/completions")
    async def chat_completions(request: Request) -> Response:
        ctx = ready_context(request)
        body = await read_json(request, config.max_body_bytes)

        def job() -> Job:
            messages = chat_messages(body)
            try:
                prompt = ctx.model.apply_chat_template(messages)
            except NewrllamaError as exc:
                raise BadRequest(f"the messages cannot be formatted: {exc}", "messages") from None
            return chat_job(body, prompt, ctx.n_ctx_seq)

        return await answer(request, ctx, job, chat=True)

    async def answer(request: Request, ctx: Context, make_job, chat: bool) -> Response:
        try:
            job = make_job()
        except BadRequest as exc:
            raise ApiError(400, exc.message, param=exc.param) from None
        if metrics.in_flight >= config.n_seq_max + config.max_queue:
            raise ApiError(503, "the server is busy: too many requests are waiting", "server_error",
                           headers=RETRY_SOON)
        metrics.in_flight += 1
        if job.stream:
            return await stream_answer(request, ctx, job, chat)  # in_flight ends with the stream
        try:
            prompts = [p for p in job.prompts for _ in range(job.n)]
            done = Answers(await unless_disconnected(request, ctx.agenerate_parallel(prompts, job.params)), job.n)
        except NewrllamaError as exc:  # InvalidArgumentError here: a grammar that does not parse
            raise library_error(exc, job.constraint_field) from None
        finally:
            metrics.in_flight -= 1
        failed = [(i, c) for i, c in enumerate(done) if c.finish_reason == "error"]
        if failed:
            i, completion = failed[0]
            raise prompt_failure(i // job.n, completion, "messages" if chat else "prompt")
        metrics.served(usage(done))
        return JSONResponse((chat_body if chat else completion_body)(done, engine.name))

    async def stream_answer(request: Request, ctx: Context, job: Job, chat: bool) -> Response:
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
        writer = ChunkWriter(chat, engine.name)

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

    return app
