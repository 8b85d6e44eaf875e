"""HTTP errors in OpenAI's shape, and whose a failure is: the caller's (4xx) or the server's (5xx).

A client that gets a 4xx should change its request; one that gets a 5xx may send the
same request again. So a failure is the caller's only when the request cannot run as
sent: an argument the library refuses (InvalidArgumentError: a grammar that does not
parse), a prompt that is empty, too long for its sequence or holds tokens outside the
vocabulary (a Completion whose error is not the engine's). llama_decode failing, an
internal error or any other library error is ours (500); a context closed under a
request means the server is stopping (503, as while it loads)."""
from __future__ import annotations

from typing import Dict, Optional

from ..errors import ClosedError, InvalidArgumentError, NewrllamaError
from ..engine.step.results import Completion

RETRY_SOON = {"Retry-After": "1"}


class ApiError(Exception):
    def __init__(self, status: int, message: str, kind: str = "invalid_request_error", param: Optional[str] = None,
                 headers: Optional[Dict[str, str]] = None) -> None:
        super().__init__(message)
        self.status, self.message, self.kind, self.param, self.headers = status, message, kind, param, headers


def library_error(exc: NewrllamaError, param: Optional[str] = None) -> ApiError:
    """The answer to an exception the library raised for a request (param: the field that led to it)."""
    if isinstance(exc, InvalidArgumentError):
        return ApiError(400, str(exc), param=param)
    if isinstance(exc, ClosedError):
        return ApiError(503, "the server is stopping", "server_error", headers=RETRY_SOON)
    return ApiError(500, f"{type(exc).__name__}: {exc}", "server_error")


def prompt_failure(index: int, failed: Completion, param: str) -> ApiError:
    """The answer to a request whose prompt index failed (finish_reason 'error')."""
    if failed.engine_error:
        return ApiError(500, f"prompt {index}: {failed.error}", "server_error")
    return ApiError(400, f"prompt {index}: {failed.error}", param=param)
