"""Errors of the OpenAI-compatible routes, in OpenAI's shape: ``{"error": {"message", "type", "param", "code"}}``.

The rest of the service answers problem+json; these routes answer what OpenAI clients parse instead (the SDK raises
``AuthenticationError``, ``RateLimitError``, ... with ``error.message`` as their text, and chat front-ends show that
message to the user). The same failures, the same status codes and headers (``Retry-After``, ``WWW-Authenticate``)
as the native routes; only the body differs.

``OpenAIRoute`` is the route class of these routers: it turns what the shared dependencies raise (``ApiProblem``
from authentication, rate limits, a stopped service), FastAPI's validation errors and its HTTP errors (a body that
is not UTF-8) into this shape, so the app's
problem+json handlers never see a failure of these routes.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Coroutine, Mapping, Sequence
from typing import Any

from fastapi import Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException

from researchcrew.redaction import public_text
from researchcrew.service._problems import ApiProblem, store_problem
from researchcrew.service.openai_compat._schema import ErrorBody, ErrorDetail

logger = logging.getLogger(__name__)

_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "invalid_request_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
}


class OpenAIError(Exception):
    """A failure of an OpenAI-compatible route, answered in OpenAI's error shape."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        param: str | None = None,
        code: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.param = param
        self.code = code
        self.headers = dict(headers or {})

    @classmethod
    def from_problem(cls, problem: ApiProblem) -> OpenAIError:
        return cls(problem.status, problem.detail, code=_code(problem.kind), headers=problem.headers)

    def body(self) -> ErrorBody:
        kind = _TYPES.get(self.status, "server_error" if self.status >= 500 else "invalid_request_error")
        message = public_text(self.message)
        return ErrorBody(error=ErrorDetail(message=message, type=kind, param=self.param, code=self.code))

    def response(self) -> JSONResponse:
        return JSONResponse(self.body().model_dump(mode="json"), status_code=self.status, headers=self.headers)


def unsupported(param: str, message: str) -> OpenAIError:
    """A parameter asks for something researchcrew cannot give."""
    return OpenAIError(400, message, param=param, code="unsupported_parameter")


def _code(kind: str | None) -> str | None:
    """The problem kind as an OpenAI-style code (``rate-limited`` → ``rate_limited``)."""
    return kind.replace("-", "_") if kind else None


def validation_error(errors: Sequence[Any]) -> OpenAIError:
    """FastAPI's validation errors as one OpenAI error naming the first parameter at fault."""
    first = errors[0] if errors else {}
    location = [str(part) for part in first.get("loc", ()) if part != "body"]
    param = ".".join(location) or None
    if first.get("type") == "extra_forbidden":
        message = f"Unrecognized request argument supplied: {param}"
        return OpenAIError(400, message, param=param, code="unknown_parameter")
    if first.get("type") in ("json_invalid", "model_attributes_type"):
        return OpenAIError(400, "The body is not a JSON object.", code="invalid_json")
    message = str(first.get("msg", "invalid value"))
    more = f" (and {len(errors) - 1} more problem(s))" if len(errors) > 1 else ""
    return OpenAIError(400, f"Invalid value for {param or 'the request'}: {message}{more}", param=param)


class OpenAIRoute(APIRoute):
    """A route whose failures, including those of its dependencies and of body validation, are OpenAI errors."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def openai_errors(request: Request) -> Response:
            try:
                return await handler(request)
            except OpenAIError as error:
                return error.response()
            except ApiProblem as problem:
                return OpenAIError.from_problem(problem).response()
            except RequestValidationError as error:
                return validation_error(error.errors()).response()
            except StarletteHTTPException as error:  # e.g. 400 for a body that is not UTF-8
                detail = error.detail if isinstance(error.detail, str) and error.detail else "The request failed."
                return OpenAIError(error.status_code, detail, headers=error.headers).response()
            except Exception as error:  # these routes' outermost guard: a bug still answers in OpenAI's shape
                outage = store_problem(error)  # e.g. the API-key check when the memory store is down: 503
                if outage is not None:
                    logger.warning("%s %s: %s: %s", request.method, request.url.path, type(error).__name__, error)
                    return OpenAIError.from_problem(outage).response()
                incident = uuid.uuid4().hex[:12]
                logger.error("unexpected error %s on %s %s", incident, request.method, request.url.path, exc_info=error)
                message = f"The service failed unexpectedly; the error is logged as {incident}."
                return OpenAIError(500, message, code="internal_error").response()

        return openai_errors
