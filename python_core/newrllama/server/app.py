"""The FastAPI application: OpenAI routes (routes.py) over one Context, whose engine thread batches every
request. A client that goes away has its prompts cancelled at once; a full queue answers 503 with Retry-After;
every error is an OpenAI error body."""
from __future__ import annotations

import asyncio
from contextlib import asynccontextmanager

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException

from .api_errors import ApiError
from .http_io import ClientGone, CountRequests
from .openai_response import error_body
from .routes import router
from .served_engine import Engine, ServerConfig, ServerState

ROUTES = frozenset(route.path for route in router.routes)


async def api_error(request: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse(error_body(exc.message, exc.kind, exc.param), exc.status, headers=exc.headers)


async def http_error(request: Request, exc: HTTPException) -> JSONResponse:
    return JSONResponse(error_body(str(exc.detail), "invalid_request_error"), exc.status_code,
                        headers=getattr(exc, "headers", None))


async def internal_error(request: Request, exc: Exception) -> JSONResponse:
    return JSONResponse(error_body(f"internal error: {exc!r}", "server_error"), 500)


async def client_gone(request: Request, exc: ClientGone) -> Response:
    return Response(status_code=499)  # nobody reads it; nginx's code for a client that went away


def create_app(config: ServerConfig) -> FastAPI:
    state = ServerState(config, Engine(config))

    @asynccontextmanager
    async def lifespan(app: FastAPI):
        state.engine.start()
        yield
        await asyncio.get_running_loop().run_in_executor(None, state.engine.close)

    app = FastAPI(title="newrllama", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.server = state
    app.state.engine = state.engine  # for in-process callers (tests) that reach the context
    for kind, handler in ((ApiError, api_error), (HTTPException, http_error), (Exception, internal_error),
                          (ClientGone, client_gone)):
        app.add_exception_handler(kind, handler)
    app.add_middleware(CountRequests, metrics=state.metrics, routes=ROUTES)
    app.include_router(router)
    return app
