"""The server's HTTP plumbing, apart from what it answers: reading a JSON body within a limit, cancelling work
when the client goes away, and counting answered requests by route."""
from __future__ import annotations

import asyncio
import json
from typing import Any, Awaitable, Dict, FrozenSet, TypeVar

from fastapi import Request

from .api_errors import ApiError
from .metrics import ServerMetrics

T = TypeVar("T")


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

    def __init__(self, app, metrics: ServerMetrics, routes: FrozenSet[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        route = scope["path"] if scope["path"] in self.routes else "other"

        async def counting_send(message) -> None:
            if message["type"] == "http.response.start":
                self.metrics.requests[(route, message["status"])] += 1
            await send(message)

        await self.app(scope, receive, counting_send)
