"""The simulator's errors: each carries its HTTP status, a stable code and, where it
applies, the request field at fault. They travel through Ray actor calls unchanged."""

from __future__ import annotations

from typing import Any


class SimError(Exception):
    """A request the simulator refuses or could not serve."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        *,
        field: str | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        self.retry_after_s = retry_after_s

    def __reduce__(self):
        # Keyword-only arguments: pickle (Ray) needs help to rebuild the exception.
        return (_rebuild, (self.status, self.code, self.message, self.field, self.retry_after_s))

    def body(self) -> dict[str, Any]:
        """The JSON error body: OpenAI's ``{"error": {...}}`` shape plus ``field``."""
        error: dict[str, Any] = {
            "code": self.code,
            "message": self.message,
            "type": _TYPES.get(self.status, "error"),
        }
        if self.field is not None:
            error["field"] = self.field
        return {"error": error}


def _rebuild(
    status: int, code: str, message: str, field: str | None, retry: float | None
) -> SimError:
    return SimError(status, code, message, field=field, retry_after_s=retry)


_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    404: "not_found_error",
    409: "conflict_error",
    413: "request_too_large",
    422: "invalid_request_error",
    429: "rate_limit_error",
    502: "upstream_error",
    503: "unavailable_error",
    504: "timeout_error",
}


def not_found(session_id: str) -> SimError:
    # The same answer for a missing, expired or another team's session: a team cannot
    # learn which ids exist.
    return SimError(404, "session_not_found", f"no session {session_id!r} for this API key")


def environment_not_found(name: str) -> SimError:
    # As for sessions: another team's environment is indistinguishable from none.
    return SimError(404, "environment_not_found", f"no environment {name!r} for this API key")
