"""A failure the server did not foresee answers 500 in OpenAI's error shape, saying what failed and no more: no
traceback and no source paths reach the client (they are the server's to log). In process, over ASGI, with no
model: fast, so in the fast lane (tests/breakage/19-server-error-leaks-traceback.patch must fail it)."""
from __future__ import annotations

import asyncio

import pytest

import newrllama

httpx = pytest.importorskip("httpx")
pytest.importorskip("fastapi")


class BrokenContext:
    """A context whose bookkeeping fails in a way no route expects."""

    def n_used_cells(self) -> int:
        raise RuntimeError("the cell count went wrong")


def test_an_unexpected_error_is_a_500_error_body_without_a_traceback():
    from newrllama.server import ServerConfig, create_app

    app = create_app(ServerConfig())  # its lifespan is not run: no model is loaded
    app.state.engine.ctx = BrokenContext()

    async def get_metrics():
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            return await http.get("/metrics")

    r = asyncio.run(get_metrics())
    assert r.status_code == 500, r.text[:400]
    error = r.json()["error"]
    assert error["type"] == "server_error" and "the cell count went wrong" in error["message"]
    for leak in ("Traceback", 'File "', ".py"):
        assert leak not in r.text, r.text[:400]


def test_library_errors_are_the_callers_only_when_the_request_cannot_run():
    from newrllama.server.api_errors import library_error, prompt_failure
    assert library_error(newrllama.InvalidArgumentError("the grammar could not be parsed"), "grammar").status == 400
    assert library_error(newrllama.ClosedError("closed")).status == 503
    for ours in (newrllama.GenerationError("x"), newrllama.ContextError("x"), newrllama.TokenizeError("x")):
        assert library_error(ours).status == 500
    failed = newrllama.Completion("", finish_reason="error", error="llama_decode failed", engine_error=True)
    assert prompt_failure(2, failed, "prompt").status == 500
    refused = newrllama.Completion("", finish_reason="error", error="prompt is empty")
    assert (prompt_failure(2, refused, "prompt").status, prompt_failure(2, refused, "prompt").param) == (400, "prompt")
