"""Error answers: every failure says what was wrong and what to do, as JSON."""

from __future__ import annotations

import logging

from fastapi import FastAPI, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

log = logging.getLogger("tokenshape")


class ErrorResponse(BaseModel):
    """A request that could not be taken at all."""

    detail: str


async def _validation(_request: Request, exc: RequestValidationError) -> JSONResponse:
    problems = "; ".join(
        f"{'.'.join(str(p) for p in e['loc'][1:]) or e['loc'][0]}: {e['msg']}"
        + (" (use ISO 8601, e.g. 2026-11-20T10:00:00Z)" if "datetime" in e["msg"] else "")
        for e in exc.errors()
    )
    return JSONResponse({"detail": f"invalid parameters: {problems}"}, status_code=422)


async def _http(request: Request, exc: StarletteHTTPException) -> Response:
    # FastAPI's answer to a JSON body that is not UTF-8 names nothing and is a 400 where
    # every other bad body is a 422: say what is wrong, like the rest.
    if exc.status_code == 400 and exc.detail == "There was an error parsing the body":
        return JSONResponse(
            {"detail": "invalid parameters: body: not valid JSON (send UTF-8 JSON)"},
            status_code=422,
        )
    return await http_exception_handler(request, exc)


async def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    # Logged with its traceback for the operator; the client gets a plain sentence.
    log.exception("unexpected error on %s %s", request.method, request.url.path)
    return JSONResponse(
        {
            "detail": f"internal error ({type(exc).__name__}); nothing from this request was "
            "stored. Retry later; if it persists, see the server log."
        },
        status_code=500,
    )


def install(app: FastAPI) -> None:
    """Answer bad parameters with a 422 naming each, and anything unexpected with a plain 500."""
    app.add_exception_handler(RequestValidationError, _validation)  # type: ignore[arg-type]
    app.add_exception_handler(StarletteHTTPException, _http)  # type: ignore[arg-type]
    app.add_exception_handler(Exception, _unexpected)
