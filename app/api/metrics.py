"""GET /metrics: the server's own metrics in the Prometheus text format."""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response
from prometheus_client.exposition import choose_encoder

router = APIRouter(tags=["metrics"])


async def may_scrape(request: Request) -> None:
    """Who may scrape /metrics: anyone for now (the auth mode will ask for a `read` token)."""


@router.get(
    "/metrics",
    dependencies=[Depends(may_scrape)],
    response_class=Response,
    responses={200: {"content": {"text/plain": {}}, "description": "Prometheus text format."}},
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
    return Response(encode(request.app.state.metrics.registry), media_type=content_type)
