"""GET /metrics: the server's own metrics in the Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client.exposition import choose_encoder

from app.server import runtime

# Who may scrape is the auth gate's decision (app/auth/gate.py): a `read` token when logins
# are on, like the rest of /api.
router = APIRouter(tags=["metrics"])


@router.get(
    "/metrics",
    response_class=Response,
    responses={
        200: {
            "content": {"text/plain": {}, "application/openmetrics-text": {}},
            "description": "Prometheus text format (OpenMetrics when the Accept header asks).",
        }
    },
    summary="The server's own metrics (Prometheus)",
    description=(
        "Records accepted, duplicate and rejected by gateway and format, writer queue depth and "
        "flush latency, HTTP responses by route and status, weekly email runs, process basics."
    ),
)
def metrics(request: Request) -> Response:
    """The app's registry, encoded as the scraper asks (Prometheus text or OpenMetrics)."""
    # A plain def: FastAPI runs it in a worker thread, where the report_runs count may block.
    encode, content_type = choose_encoder(request.headers.get("accept", ""))
    return Response(encode(runtime.of(request).metrics.registry), media_type=content_type)
