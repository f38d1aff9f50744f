"""The server's own Prometheus metrics: one registry per app, the writer observer, HTTP counts."""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Iterator
from typing import Any

from fastapi import FastAPI
from prometheus_client import CollectorRegistry, Counter, Histogram, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector
from starlette.routing import compile_path

from app.jobs.push import PushJob
from app.storage import quarantine, report_runs
from app.storage.batches import Batch, WriteResult
from app.storage.database import Database
from app.storage.write.writer import Writer

log = logging.getLogger("tokenshape.metrics")

# Commits take milliseconds normally and seconds when the disk struggles.
FLUSH_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)
HTTP_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
# Any other method (a client may send any token) is counted as "other": labels stay bounded.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
RUN_STATUSES = ("sending", "sent", "failed", "possibly-sent")


class Metrics:
    """Every metric of one app, on a registry of its own (tests build many apps in a process)."""

    def __init__(
        self,
        db: Database,
        writer: Callable[[], Writer | None],
        lake_push: Callable[[], PushJob | None] = lambda: None,
    ):
        self.registry = CollectorRegistry()
        self.records = Counter(
            "tokenshape_ingest_records",
            "Records the writer committed, by gateway, format and outcome "
            "(accepted, duplicate, rejected; a payload refused whole counts as one rejected).",
            ["gateway", "format", "outcome"],
            registry=self.registry,
        )
        self.flush_seconds = Histogram(
            "tokenshape_writer_flush_seconds",
            "Time of one writer flush (one transaction), in seconds.",
            buckets=FLUSH_BUCKETS,
            registry=self.registry,
        )
        self.flush_failures = Counter(
            "tokenshape_writer_flush_failures",
            "Writer flushes that failed (nothing of those batches was stored).",
            registry=self.registry,
        )
        self.http_responses = Counter(
            "tokenshape_http_responses",
            "HTTP responses by method, route template ('dash' for the dashboard) and status.",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.http_seconds = Histogram(
            "tokenshape_http_request_duration_seconds",
            "Time from request to the end of the response body, in seconds.",
            ["method", "route"],
            buckets=HTTP_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(WriterCollector(writer))
        self.registry.register(ReportRunsCollector(db))
        self.registry.register(QuarantineCollector(db))
        self.registry.register(LakePushCollector(lake_push))
        ProcessCollector(registry=self.registry)

    # The writer's FlushObserver: called on the event loop after each flush, so kept cheap.
    def flushed(self, seconds: float, batches: list[Batch], results: list[WriteResult]) -> None:
        """Count a committed flush: its latency and each batch's outcome."""
        self.flush_seconds.observe(seconds)
        for batch, result in zip(batches, results, strict=True):
            for outcome, n in (
                ("accepted", result.accepted),
                ("duplicate", result.duplicates),
                ("rejected", result.rejected),
            ):
                if n:
                    self.records.labels(batch.gateway, batch.format, outcome).inc(n)

    def flush_failed(self, seconds: float, batches: list[Batch]) -> None:
        """Count a flush whose transaction failed."""
        self.flush_failures.inc()

    def responded(self, method: str, route: str, status: int, seconds: float) -> None:
        """Count one HTTP response."""
        method = method if method in METHODS else "other"
        self.http_responses.labels(method, route, str(status)).inc()
        self.http_seconds.labels(method, route).observe(seconds)


class WriterCollector(Collector):
    """Writer queue depth and state, read at scrape time."""

    def __init__(self, writer: Callable[[], Writer | None]):
        self.writer = writer

    def collect(self) -> Iterator[Metric]:
        """The writer's gauges (only `running` before the writer exists)."""
        writer = self.writer()
        yield GaugeMetricFamily(
            "tokenshape_writer_running",
            "1 while the writer's flush loop runs.",
            value=1 if writer is not None and writer.running else 0,
        )
        if writer is None:
            return
        yield GaugeMetricFamily(
            "tokenshape_writer_queue_rows",
            "Rows queued for the writer or being committed.",
            value=writer.pending_rows,
        )
        yield GaugeMetricFamily(
            "tokenshape_writer_queue_capacity_rows",
            "Queued rows at which ingest answers 503 (TOKENSHAPE_WRITER_QUEUE_ROWS).",
            value=writer.capacity_rows,
        )
        yield GaugeMetricFamily(
            "tokenshape_writer_journal_rows",
            "Acknowledged rows in the journal, not yet moved into the database.",
            value=writer.unmoved_rows,
        )
        yield CounterMetricFamily(
            "tokenshape_writer_saturated",
            "Ingest requests answered 503 because the writer queue was full.",
            value=writer.stats.saturated,
        )


class ReportRunsCollector(Collector):
    """Weekly email attempts by status, counted in `report_runs` at scrape time."""

    def __init__(self, db: Database):
        self.db = db

    def collect(self) -> Iterator[Metric]:
        """One gauge sample per status; nothing when the database cannot be read."""
        try:
            counts = report_runs.count_by_status(self.db.cursor())
        except Exception as exc:  # a scrape must not fail because the database is closing
            log.warning("report_runs could not be read for /metrics: %s", exc)
            return
        family = GaugeMetricFamily(
            "tokenshape_report_runs",
            "Weekly email attempts recorded in report_runs, by status.",
            labels=["status"],
        )
        for status in sorted(set(RUN_STATUSES) | set(counts)):
            family.add_metric([status], counts.get(status, 0))
        yield family


class QuarantineCollector(Collector):
    """Damaged files moved aside and not yet acknowledged, by kind, read at scrape time."""

    def __init__(self, db: Database):
        self.db = db

    def collect(self) -> Iterator[Metric]:
        """One gauge sample per kind (journal segment, …); 0 for journal segments at least."""
        family = GaugeMetricFamily(
            "tokenshape_quarantined_files",
            "Damaged files in the quarantine folder no operator has acknowledged.",
            labels=["kind"],
        )
        counts: dict[str, int] = {"journal segment": 0}
        for damage in quarantine.open_damage(quarantine.folder_for(self.db.path)):
            counts[damage.kind] = counts.get(damage.kind, 0) + 1
        for kind, n in sorted(counts.items()):
            family.add_metric([kind], n)
        yield family


class LakePushCollector(Collector):
    """The lake push job's rounds, read at scrape time (nothing when no push is set up)."""

    def __init__(self, job: Callable[[], PushJob | None]):
        self.job = job

    def collect(self) -> Iterator[Metric]:
        """Rounds by outcome, hours pushed, failures in a row, the last success."""
        job = self.job()
        if job is None:
            return
        rounds = CounterMetricFamily(
            "tokenshape_lake_push_rounds",
            "Lake push rounds since the server started, by outcome (ok, failed).",
            labels=["outcome"],
        )
        rounds.add_metric(["ok"], job.rounds - job.failed_rounds)
        rounds.add_metric(["failed"], job.failed_rounds)
        yield rounds
        yield CounterMetricFamily(
            "tokenshape_lake_push_hours",
            "Hours of rollups pushed to the central node (an hour sent again counts again).",
            value=job.hours_pushed,
        )
        yield GaugeMetricFamily(
            "tokenshape_lake_push_consecutive_failures",
            "Lake push rounds that failed in a row (0 after a round succeeds).",
            value=job.consecutive_failures,
        )
        if job.last_success is not None:
            yield GaugeMetricFamily(
                "tokenshape_lake_push_last_success_timestamp_seconds",
                "When a lake push round last completed, in Unix seconds.",
                value=job.last_success.timestamp(),
            )


class RouteTemplates:
    """The documented routes' templates, for answers given before the router ran."""

    def __init__(self, app: FastAPI):
        self.app = app
        self._compiled: list[tuple[re.Pattern[str], str]] | None = None

    def find(self, path: str) -> str | None:
        """The template a path matches (static paths win over parameters), or None."""
        if self._compiled is None:
            try:
                # The OpenAPI paths are the public list of templates: FastAPI's own route
                # objects nest included routers in private wrappers.
                paths = sorted(self.app.openapi().get("paths", {}), key=lambda p: ("{" in p, p))
            except Exception as exc:
                log.warning("no route templates for /metrics labels: %s", exc)
                paths = []
            self._compiled = [(compile_path(p)[0], p) for p in paths]
        return next((p for regex, p in self._compiled if regex.match(path)), None)


def route_label(scope: dict[str, Any], templates: RouteTemplates | None = None) -> str:
    """The route template of a request; every Dash path is 'dash', no route is 'unmatched'."""
    route = scope.get("route")
    path = getattr(route, "path", None)
    if route is None or path is None:
        # Answered before routing (the auth gate's 401s and redirects): the template it would
        # have taken; an undocumented GET would have gone to Dash's catch-all.
        found = templates.find(scope["path"]) if templates is not None else None
        if found is not None:
            return found
        return "dash" if scope["method"] in ("GET", "HEAD") else "unmatched"
    module = getattr(getattr(route, "endpoint", None), "__module__", "") or ""
    # Dash serves pages through a catch-all route and assets under fingerprinted paths:
    # one label for all of it keeps the series count fixed whatever the browser asks for.
    if module.startswith("dash") or path.startswith("/_dash") or path == "/{path:path}":
        return "dash"
    return path


class HttpMetrics:
    """Pure ASGI middleware counting responses (BaseHTTPMiddleware would buffer streams)."""

    def __init__(self, app: Any, metrics: Metrics, templates: RouteTemplates):
        self.app = app
        self.metrics = metrics
        self.templates = templates

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # what the client gets if the app raises before answering

        async def send_status(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            # The router filled scope["route"] in place, so the template is known here.
            self.metrics.responded(
                scope["method"],
                route_label(scope, self.templates),
                status,
                time.perf_counter() - started,
            )


def install(app: FastAPI, metrics: Metrics) -> None:
    """Count every HTTP response the app gives in `metrics` (the Runtime's)."""
    app.add_middleware(HttpMetrics, metrics=metrics, templates=RouteTemplates(app))
