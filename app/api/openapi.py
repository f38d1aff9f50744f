"""The API's surface as the server really answers: its OpenAPI document, and 404s for paths
it does not have.

FastAPI describes a 422 as its list of validation errors, but the app answers every error,
422s included, with one sentence (`{"detail": "..."}`); and the auth gate, a middleware FastAPI
cannot see, answers 401 and 403 on `/api` routes and `/metrics`. This rewrites the generated
document to say so, so clients and schema-driven tests read what is really sent."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, FastAPI, HTTPException, Request

ERROR = {  # the same as ingest's ErrorResponse, used when no route declared that model
    "title": "ErrorResponse",
    "type": "object",
    "properties": {"detail": {"type": "string", "title": "Detail"}},
    "required": ["detail"],
    "description": "What was wrong and what to do, in one sentence.",
}
GATED = {
    "401": "No valid login session or bearer token (when authentication is on).",
    "403": "The token's scope or the user's role does not allow this.",
}
PUBLIC = ("/api/health",)


def _error_response(description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorResponse"}}},
    }


def rewrite(document: dict[str, Any]) -> dict[str, Any]:
    """Plain-sentence 422s and the gate's 401/403, in a generated OpenAPI document."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.setdefault("ErrorResponse", ERROR)
    for path, operations in document.get("paths", {}).items():
        gated = (path.startswith("/api/") or path == "/metrics") and path not in PUBLIC
        for operation in operations.values():
            responses = operation.setdefault("responses", {})
            if "422" in responses:
                responses["422"] = _error_response("Invalid parameters or body, named.")
            if gated:
                for status, description in GATED.items():
                    responses.setdefault(status, _error_response(description))
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    return document


def install(app: FastAPI) -> None:
    """Serve the rewritten document at /openapi.json (built once, on first request)."""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = rewrite(generate())
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


# Registered after the API's routers and before the dashboard's catch-all page route: a
# mistyped /api path is a JSON 404 naming it, not the dashboard's HTML not-found page.
unknown = APIRouter(include_in_schema=False)


@unknown.get("/api/{rest:path}")
def no_such_route(request: Request, rest: str) -> None:
    """404 naming the path, for GETs under /api that no route serves."""
    raise HTTPException(
        404, detail=f"no API route GET {request.url.path}; the routes are listed at /docs"
    )
