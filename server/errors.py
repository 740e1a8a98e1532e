"""API errors: every failure leaves the server as ``{"error": {"message", "type", "param", "code"}}`` with its
HTTP status, the shape OpenAI's clients parse. The message is one line; no traceback ever reaches a client.
"""

from __future__ import annotations

from typing import Any

INVALID = "invalid_request_error"


class ApiError(Exception):
    """An error answered with HTTP ``status`` and the body of :meth:`body`.

    ``kind`` is the error object's ``type``; ``param`` the request field at fault (or None); ``code`` a
    machine-readable reason (or None). ``headers``: extra response headers (``retry-after`` for 429).
    """

    def __init__(self, status: int, message: str, kind: str = INVALID, param: str | None = None,
                 code: str | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status = status
        self.message = one_line(message)
        self.kind = kind
        self.param = param
        self.code = code
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


def one_line(text: str, limit: int = 2000) -> str:
    """``text`` on one line (newlines become spaces), cut to ``limit`` characters."""
    text = " ".join(str(text).split("\n")).strip()
    return text if len(text) <= limit else text[: limit - 3] + "..."


def bad_request(message: str, param: str | None = None, code: str | None = None) -> ApiError:
    """400: a malformed body, a field of the wrong type or value, a schema the compiler refuses, a prompt
    longer than the context."""
    return ApiError(400, message, INVALID, param, code)


def unauthorized(message: str = "missing or wrong API key: send 'Authorization: Bearer <key>'") -> ApiError:
    """401: the ``--api-key`` bearer token is missing or wrong."""
    return ApiError(401, message, INVALID, None, "invalid_api_key", {"www-authenticate": "Bearer"})


def model_not_found(model: str, served: str) -> ApiError:
    """404: the request names a model this server does not serve."""
    return ApiError(404, f"the model {model!r} does not exist; this server serves {served!r}", INVALID, "model",
                    "model_not_found")


def not_found(message: str) -> ApiError:
    """404: no such route."""
    return ApiError(404, message, INVALID, None, "not_found")


def too_many(message: str, code: str = "rate_limit_exceeded", retry_after: int = 1) -> ApiError:
    """429: the queue is full or the compile rate limit is reached; retry after ``retry_after`` seconds."""
    return ApiError(429, message, "rate_limit_error", None, code, {"retry-after": str(retry_after)})


def server_error(message: str) -> ApiError:
    """500: anything unexpected, as one line (the server keeps serving)."""
    return ApiError(500, message, "server_error", None, "internal_error")


def unavailable(message: str) -> ApiError:
    """503: the engine is shutting down."""
    return ApiError(503, message, "server_error", None, "unavailable")
