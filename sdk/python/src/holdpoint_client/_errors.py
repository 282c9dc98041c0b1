"""Exceptions: one class per error code of the API, all carrying the server's ``code``, ``message`` and ``details``.

A person's "no" is never one of these: it is an answer (``AskResult.outcome == "answered"`` with its value).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._types import ApprovalResult


class HoldpointError(Exception):
    """Anything this library raises."""


class TransportError(HoldpointError):
    """The server could not be reached, or the connection broke, and retrying did not help (or was not safe)."""


class ApiError(HoldpointError):
    """The server refused the request with ``{"error": {"code", "message", "details"}}``."""

    code: str = "unknown"

    def __init__(
        self,
        message: str,
        *,
        status: int,
        code: str | None = None,
        details: Any = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        if code is not None:
            self.code = code
        self.details = details
        self.headers = dict(headers or {})

    def __str__(self) -> str:
        return f"{self.code} ({self.status}): {self.message}"


class BadRequestError(ApiError):
    """400 ``bad_request``: the request is malformed."""

    code = "bad_request"


class UnauthorizedError(ApiError):
    """401 ``unauthorized``: no token, or one that is not valid (revoked, mistyped)."""

    code = "unauthorized"


class ForbiddenError(ApiError):
    """403 ``forbidden``: the token's role may not do this (an ``agent`` token answering, the asker approving)."""

    code = "forbidden"


class NotFoundError(ApiError):
    """404 ``not_found``: no such object in the token's workspace."""

    code = "not_found"


class ConflictError(ApiError):
    """409 ``conflict``: e.g. the question is no longer pending; ``details`` says its status and who answered."""

    code = "conflict"


class GoneError(ApiError):
    """410 ``gone``."""

    code = "gone"


class TooLargeError(ApiError):
    """413 ``too_large``: the body, or a question's ``body`` or ``context``, is over its limit."""

    code = "too_large"


class InvalidError(ApiError):
    """422 ``invalid``: well-formed but not valid; ``details["fields"]`` maps each field to what is wrong."""

    code = "invalid"

    @property
    def fields(self) -> dict[str, str]:
        fields = self.details.get("fields") if isinstance(self.details, dict) else None
        return dict(fields) if isinstance(fields, dict) else {}


class RateLimitedError(ApiError):
    """429 ``rate_limited``; ``retry_after`` is how many seconds the server asked to wait."""

    code = "rate_limited"

    @property
    def retry_after(self) -> float | None:
        return retry_after_seconds(self.headers)


class InternalServerError(ApiError):
    """500 ``internal``: the server failed; its log says why."""

    code = "internal"


class ApprovalDenied(HoldpointError):
    """A function guarded by ``@requires_approval`` was not run: denied by a rule, rejected, expired or cancelled.

    ``result.outcome`` tells which (an expiry is nobody deciding, not a "no"; ``denied_by_rule`` a rule's refusal,
    named by ``result.rule``), ``result.reason()`` why.
    """

    def __init__(self, result: ApprovalResult, tool_name: str | None = None) -> None:
        self.result = result
        tool = tool_name or result.tool_name or "the call"
        super().__init__(f"{tool} was not approved ({result.outcome}): {result.reason()}")


_BY_CODE: dict[str, type[ApiError]] = {
    cls.code: cls
    for cls in (
        BadRequestError,
        UnauthorizedError,
        ForbiddenError,
        NotFoundError,
        ConflictError,
        GoneError,
        TooLargeError,
        InvalidError,
        RateLimitedError,
        InternalServerError,
    )
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    413: TooLargeError,
    422: InvalidError,
    429: RateLimitedError,
    500: InternalServerError,
}


def retry_after_seconds(headers: Mapping[str, str]) -> float | None:
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return max(0.0, float(value))
            except ValueError:
                return None
    return None


def error_from_response(status: int, body: bytes, headers: Mapping[str, str]) -> ApiError:
    """The exception for a failed response: by the body's ``code`` when it has the API's error shape, else by the
    status (a proxy in front of the server answers in its own words)."""
    code: str | None = None
    message = ""
    details: Any = None
    try:
        parsed = json.loads(body) if body else None
    except ValueError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, dict) and isinstance(error.get("code"), str):
        code = error["code"]
        message = str(error.get("message", ""))
        details = error.get("details")
    else:
        message = body.decode("utf-8", "replace").strip()[:500] or f"HTTP {status}"
    cls = _BY_CODE.get(code or "") or _BY_STATUS.get(status) or ApiError
    return cls(message, status=status, code=code or cls.code, details=details, headers=headers)
