"""Rightsizing page: per engine, observed vs current vs recommended bounds, memory, commands,
and the replicas and money under the engine's SLO.

Without an engine in the URL it lists every profiled engine; its verdicts, replicas and money
are filled by a callback after the page (a recommendation under an SLO runs the performance
model: seconds per engine). The profile editor at the bottom saves through a callback and
reloads the page with the new numbers."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import cast, get_args
from urllib.parse import urlencode

import dash
from dash import Dash, Input, Output, State, dcc, html
from dash.development.base_component import Component

from app.analytics import shapes
from app.analytics.filters import Filter
from app.auth import principal
from app.charts.heatmap import Bounds, heatmap_figure
from app.charts.memory import memory_figure
from app.dashboard import edge, filterbar, ids
from app.dashboard.edge import EngineData, FieldValue, Query
from app.dashboard.findings import drift_panel
from app.dashboard.pages import money_panel, performance_panel, register_page
from app.services import profiles as profile_store
from app.services.economics import EngineMoney, fleet_money
from app.services.profiles import NoProfile, load_profile
from app.services.rightsizing import (
    drift_note,
    engine_drift,
    recommend,
    window_note,
    window_to,
)
from app.sizing.catalog import GIB, GPUS, MODELS
from app.sizing.profile import EngineProfile, KvDtype, WeightDtype
from app.sizing.rightsize import CONCURRENCY_WORDS, Recommendation, Replicas
from app.sizing.slo import Fleet, money
from app.sizing.status import Status, engine_status, failed_status
from app.storage.database import Database

WINDOWS = {"24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
COVERAGES = {"0.99": "99%", "0.999": "99.9%", "0.9999": "99.99%"}
CURRENT_COLOUR, RECOMMENDED_COLOUR = "#d1495b", "#2a9d8f"
NUMBER_FIELDS = (
    ("tensor_parallel", "tensor parallel"),
    ("pipeline_parallel", "pipeline parallel"),
    ("gpu_memory_gib", "GPU memory GiB (override)"),
    ("memory_fraction", "memory fraction"),
    ("max_input_len", "max_input_len"),
    ("max_seq_len", "max_seq_len"),
    ("max_batch_size", "max_batch_size"),
    ("max_num_tokens", "max_num_tokens"),
    ("replicas", "replicas running today"),
    ("slo_ttft_ms", "SLO: TTFT target, ms"),
    ("slo_itl_ms", "SLO: ITL target, ms"),
    ("slo_e2e_ms", "SLO: E2E target, ms (optional)"),
    ("slo_percentile", "SLO percentile (e.g. 95)"),
    ("cost_per_gpu_hour", "cost per GPU-hour"),
    ("api_price_input_per_mtok", "API price / M input tokens"),
    ("api_price_output_per_mtok", "API price / M output tokens"),
)
# The editor's second group: what the plans count from and hold to, each falling back to the
# fleet's default (the settings) when empty.
PLAN_FIELDS = {
    "replicas": None,
    "slo_ttft_ms": "slo_ttft_ms",
    "slo_itl_ms": "slo_itl_ms",
    "slo_e2e_ms": "slo_e2e_ms",
    "slo_percentile": "slo_percentile",
    "cost_per_gpu_hour": "cost_per_gpu_hour",
    "api_price_input_per_mtok": "api_price_input_per_mtok",
    "api_price_output_per_mtok": "api_price_output_per_mtok",
}
# Money is planned over the Seasonal page's window: the last whole weeks.
MONEY_WEEKS = 4
SLO_HOW = (
    "No SLO set: give the engine targets below (SLO: TTFT / ITL target at a percentile), or the "
    "fleet a default with TOKENSHAPE_SLO_TTFT_MS and TOKENSHAPE_SLO_ITL_MS "
    "(TOKENSHAPE_SLO_PERCENTILE, 95 by default). Until then replicas follow memory alone."
)
COST_HOW = (
    "No cost per GPU-hour: set it below or for the fleet with TOKENSHAPE_COST_PER_GPU_HOUR "
    "(TOKENSHAPE_CURRENCY for the symbol) to see plans in money."
)
SELECT_FIELDS = (
    ("model", "model", (*MODELS, "hf")),
    ("gpu", "GPU", tuple(GPUS)),
    ("weight_dtype", "weight dtype", get_args(WeightDtype)),
    ("kv_dtype", "KV cache dtype", get_args(KvDtype)),
    ("framework", "framework", get_args(EngineProfile.model_fields["framework"].annotation)),
)


def _n(value: float | None, digits: int = 0) -> str:
    return "–" if value is None else f"{value:,.{digits}f}"


def _form(engines: list[str], engine: str | None, window: str, coverage: str) -> html.Form:
    def select(name: str, options: dict[str, str], chosen: str | None) -> html.Label:
        return filterbar.choice(name, name, options, chosen or "")

    return html.Form(
        [
            select("engine", {"": "all engines", **{e: e for e in engines}}, engine),
            select("window", {w: f"last {w}" for w in WINDOWS}, window),
            select("coverage", COVERAGES, coverage),
            html.Button("Apply", type="submit", id=ids.FILTER_APPLY),
        ],
        method="get",
        className="filterbar",
        id=ids.RIGHTSIZING_FORM,
    )


def _stored_row(name: str, stored: dict, cells: list) -> html.Tr:
    model, gpus = profile_store.stored_build(stored)
    keep = {"whiteSpace": "nowrap"}
    return html.Tr(
        [
            html.Td(dcc.Link(name, href="/rightsizing?" + urlencode({"engine": name})), style=keep),
            html.Td(model, style=keep),
            html.Td(gpus, style=keep),
            *cells,
        ]
    )


FLEET_HEAD = (
    "engine",
    "model",
    "GPUs",
    "status",
    "replicas: today → within the SLO",
    "cost / month: now → best plan",
    "verdict",
)


def _fleet_table(rows: list[html.Tr], total: Component | None = None) -> list[Component]:
    head = html.Thead(html.Tr([html.Th(h) for h in FLEET_HEAD]))
    out: list[Component] = [html.Table([head, html.Tbody(rows)], className="grid fleet")]
    if total is not None:
        out.append(total)
    return out


def _fleet(db: Database, query: dict) -> html.Div:
    """The fleet's engines at once; their verdicts, replicas and money follow from a callback."""
    stored = profile_store.stored_profiles(db)
    if not stored:
        return html.Div(
            [
                html.H3("No engine profiles yet"),
                html.P(
                    "Pick an engine above to create its profile, or PUT one to "
                    "/api/engines/{name} with an admin token."
                ),
            ],
            className="empty",
            id=ids.RIGHTSIZING_FLEET,
        )
    waiting = [html.Td("…", className="muted") for _ in range(3)]
    waiting.append(
        html.Td("computing replicas and money under the SLO…", className="verdict-cell muted")
    )
    rows = [_stored_row(name, profile, list(waiting)) for name, profile in stored.items()]
    clean = {k: v for k, v in query.items() if isinstance(v, str)}
    return html.Div(
        [
            html.Div(_fleet_table(rows), id=ids.RIGHTSIZING_FLEET),
            dcc.Store(id=ids.RIGHTSIZING_FLEET_QUERY, data=clean),
        ]
    )


def _replicas_cell(x: Replicas | None) -> html.Td:
    if x is None:
        return html.Td("–")
    base = f"{x.running}" if x.running is not None else f"{x.today} (needed)"
    title = f"set by {x.why_after}" + (f" · SLO {x.slo}" if x.slo else " · no SLO: memory alone")
    return html.Td(f"{base} → {x.after}", title=title)


def _money_cell(m: EngineMoney | None) -> html.Td:
    if m is None or m.baseline is None or m.best is None:
        return html.Td("–", title=(m.error or "") if m else "")
    if m.baseline.cost_month is not None and m.best.cost_month is not None:
        text = (
            f"{money(m.baseline.cost_month, m.currency)} → {money(m.best.cost_month, m.currency)}"
        )
    else:
        text = f"{m.baseline.gpu_hours_month:,.0f} → {m.best.gpu_hours_month:,.0f} GPU-h"
    return html.Td(text, title=f"best: {m.best.label}")


def fleet_rows(db: Database, query: dict, now: datetime, tz: str, fleet: Fleet) -> list:
    """The fleet table with every engine's status, replicas, money and verdict, and the total."""
    start, end, _, coverage = _window(query, now)
    money_of = fleet_money(db, now=now, tz=tz, fleet=fleet, weeks=MONEY_WEEKS)
    by_name = {m.engine: m for m in money_of.engines}
    rows = []
    for name, stored in profile_store.stored_profiles(db).items():
        replicas = None
        try:
            r = recommend(
                db, name, start=start, end=end, coverage=float(coverage), tz=tz, fleet=fleet
            )
            verdict, status, replicas = r.verdict, engine_status(r), r.replicas
        except NoProfile as exc:  # a stored profile that is no longer valid
            verdict = str(exc)
            status = failed_status(verdict)
        except Exception as exc:  # one engine's failure must not blank the fleet
            verdict = profile_store.sizing_failure(name, exc)
            status = failed_status(verdict)
        cells = [
            status_cell(status),
            _replicas_cell(replicas),
            _money_cell(by_name.get(name)),
            html.Td(verdict, className="verdict-cell"),
        ]
        rows.append(_stored_row(name, stored, cells))
    return _fleet_table(rows, _fleet_total(money_of))


def status_badge(status: Status) -> html.Span:
    """An engine's status in the one vocabulary, coloured, its reason on hover."""
    return html.Span(
        status.label,
        title=status.reason,
        className=f"status status-{status.key}",
        style={"color": status.colour, "fontWeight": "bold", "whiteSpace": "nowrap"},
    )


def status_cell(status: Status) -> html.Td:
    """The fleet table's status cell: the coloured word and, beneath it, why."""
    return html.Td(
        [status_badge(status), html.Div(status.reason, className="muted small")],
        className="status-cell",
    )


def _fleet_total(m) -> html.P:
    cur = m.currency
    if m.now_month is not None and m.best_month is not None:
        figures = (
            f"{money(m.now_month, cur)} a month now, {money(m.best_month, cur)} with each "
            f"engine's best plan: {m.headline()}"
        )
    else:
        figures = (
            f"{m.gpu_hours_now_month:,.0f} GPU-hours a month now, "
            f"{m.gpu_hours_best_month:,.0f} with each engine's best plan: {m.headline()} "
            "(set a cost per GPU-hour on every engine, or TOKENSHAPE_COST_PER_GPU_HOUR, for money)"
        )
    return html.P(
        [
            html.Strong("Fleet: "),
            figures,
            html.Span(
                f". Money from the plans over the last {MONEY_WEEKS} whole weeks (as on the "
                "Seasonal page); replicas for the busiest hour of the window above.",
                className="muted",
            ),
        ],
        id=ids.RIGHTSIZING_FLEET_TOTAL,
    )


def _kpi(label: str, value: str, note: str = "") -> html.Div:
    return html.Div(
        [
            html.Div(label, className="kpi-label"),
            html.Div(value, className="kpi-value small"),
            html.Div(note, className="kpi-delta"),
        ],
        className="kpi",
    )


def _replicas_block(r: Recommendation, engine: str) -> html.Div:
    """Replicas now and after the rebuild with what set them, their cost, the SLO in words; the
    plans in money follow from a callback."""
    x = r.replicas
    parts: list[Component] = [html.H3("Replicas and money")]
    if x is None:
        parts.append(
            html.P(
                "No replica plan: the window has no hourly load to size from.", className="muted"
            )
        )
    else:
        running = (
            _kpi("running today", f"{x.running}", "from the profile")
            if x.running is not None
            else _kpi("running today", "not set", "set 'replicas running today' below")
        )
        cost_now, cost_after = x.cost_month(x.baseline), x.cost_month(x.after)
        cards = [
            running,
            _kpi(
                "needed with today's bounds",
                f"{x.today}",
                f"the window's busiest hour, set by {x.why_today}",
            ),
            _kpi(
                "needed after the rebuild",
                f"{x.after}",
                f"the window's busiest hour, set by {x.why_after}",
            ),
        ]
        if cost_now is not None and cost_after is not None:
            delta = cost_now - cost_after
            cards.append(
                _kpi(
                    "cost / month all day: now → rebuilt",
                    f"{money(cost_now, x.currency)} → {money(cost_after, x.currency)}",
                    (
                        f"saves {money(delta, x.currency)}"
                        if delta >= 1
                        else f"costs {money(-delta, x.currency)} more"
                        if delta <= -1
                        else "no saving"
                    )
                    + f" · {x.gpus_per_replica} GPU/replica at "
                    f"{x.currency}{x.cost_per_gpu_hour:,.2f}/h",
                )
            )
        parts.append(html.Div(cards, className="kpis"))
        slo = (
            html.P([html.Strong("SLO: "), x.slo], className="muted")
            if x.slo
            else html.P(SLO_HOW, className="muted")
        )
        parts.append(slo)
        if not x.feasible and x.note:
            parts.append(html.P(f"The SLO cannot be met: {x.note}", className="field-error"))
        elif x.note:
            parts.append(html.P(x.note, className="muted"))
        if x.cost_per_gpu_hour is None:
            parts.append(html.P(COST_HOW, className="muted"))
    parts += [
        html.Div(
            html.P("Planning the month's money…", className="muted"), id=ids.RIGHTSIZING_MONEY
        ),
        dcc.Store(id=ids.RIGHTSIZING_MONEY_QUERY, data={"engine": engine}),
    ]
    return html.Div(parts, className="card", id=ids.RIGHTSIZING_REPLICAS)


def _bounds_table(r: Recommendation) -> html.Table:
    t, cur, rec = r.traffic, r.current, r.recommended
    q = f"p{r.coverage * 100:g}"
    rows = [
        ("max_input_len", t.isl_q, cur.max_input_len, rec.max_input_len if rec else None),
        ("max_seq_len (ISL + OSL)", t.seq_q, cur.max_seq_len, rec.max_seq_len if rec else None),
        ("max output", t.osl_q, None, rec.max_output_len if rec else None),
        ("max_batch_size", None, cur.max_batch_size, rec.max_batch_size if rec else None),
        ("max_num_tokens", None, cur.max_num_tokens, rec.max_num_tokens if rec else None),
        ("requests refused in the window", None, r.rejected_current, r.rejected_recommended),
    ]
    body = [
        html.Tr([html.Td(label), html.Td(_n(obs)), html.Td(_n(now)), html.Td(_n(after))])
        for label, obs, now, after in rows
    ]
    head = html.Tr([html.Th(h) for h in ("", f"observed {q}", "current", "recommended")])
    return html.Table(
        [html.Thead(head), html.Tbody(body)], className="grid", id=ids.RIGHTSIZING_BOUNDS
    )


def _memory(r: Recommendation) -> html.Div:
    def parts(m) -> dict[str, float]:
        return {
            "weights": m.weights / GIB,
            "KV cache": max(m.kv_budget, 0) / GIB,
            "overhead": m.overhead / GIB,
            "unused": m.unused / GIB,
        }

    rows = [("now", parts(r.memory_now))]
    if r.memory_after:
        rows.append(("after rebuild", parts(r.memory_after)))
    cards = []
    for label, cap, mem in (
        ("now", r.capacity_now, r.memory_now),
        ("after rebuild", r.capacity_after, r.memory_after),
    ):
        if cap is None or mem is None:
            continue
        source = "measured (startup log)" if mem.measured else "estimated"
        if not mem.measured and mem.kv_low_tokens != mem.kv_high_tokens:
            source += f", {mem.kv_low_tokens:,}–{mem.kv_high_tokens:,}"
        cards.append(
            html.Div(
                [
                    html.Div(f"concurrency {label}", className="kpi-label"),
                    html.Div(
                        f"{_n(cap.expected)} expected · {_n(cap.worst)} full-length",
                        className="kpi-value small",
                    ),
                    html.Div(
                        f"KV cache {mem.kv_capacity_tokens:,} tokens ({source})",
                        className="kpi-delta",
                    ),
                ],
                className="kpi",
            )
        )
    now = r.memory_now
    caveat = []
    if now is not None and now.hint:
        why = "; ".join(now.uncertain)
        caveat = [html.P(f"Estimate uncertain ({why}): {now.hint}.", className="kpi-delta")]
    return html.Div(
        [
            html.Div(cards, className="kpis"),
            html.P(f"Concurrency: {CONCURRENCY_WORDS}.", className="kpi-delta"),
            *caveat,
            dcc.Graph(
                id=ids.RIGHTSIZING_MEMORY, figure=memory_figure(rows), config={"displaylogo": False}
            ),
        ]
    )


def _commands(r: Recommendation) -> html.Div:
    blocks = []
    for framework, text in r.commands.items():
        block_id = f"rightsizing-cmd-{framework}"
        blocks.append(
            html.Div(
                [
                    html.Div(
                        [
                            html.Span(
                                {
                                    "vllm": "vLLM",
                                    "trtllm": "TensorRT-LLM",
                                    "nim": "NIM",
                                    "sglang": "SGLang",
                                }[framework]
                            ),
                            dcc.Clipboard(target_id=block_id, title="copy", className="copy"),
                        ],
                        className="cmd-head",
                    ),
                    html.Pre(text, id=block_id, className="code"),
                ]
            )
        )
    return html.Div(blocks, id=ids.RIGHTSIZING_COMMANDS)


def _whatif(r: Recommendation) -> html.Div:
    rows = []
    for w in r.whatifs:
        if w.reason:
            cells = [html.Td(w.label), html.Td(w.reason, colSpan=3, className="muted")]
        else:
            assert w.memory is not None and w.capacity is not None
            note = w.caveat or ""
            cells = [
                html.Td(w.label),
                html.Td(f"{w.memory.kv_capacity_tokens:,}"),
                html.Td(f"{_n(w.capacity.expected)} / {_n(w.capacity.worst)}"),
                html.Td(note, className="muted"),
            ]
        rows.append(html.Tr(cells))
    head = html.Tr(
        [html.Th(h) for h in ("what if", "KV tokens", "expected / full-length", "caveat")]
    )
    return html.Div(
        [
            html.Table(
                [html.Thead(head), html.Tbody(rows)], className="grid", id=ids.RIGHTSIZING_WHATIF
            ),
            html.P(f"Concurrency: {CONCURRENCY_WORDS}.", className="muted"),
        ]
    )


def _number(
    name: str, label: str, value: float | None, placeholder: str = "", disabled: bool = False
) -> html.Label:
    return html.Label(
        [
            html.Span(label),
            dcc.Input(
                type="number",
                value=value,
                placeholder=placeholder,
                id={"type": "rs-field", "name": name},
                disabled=disabled,
            ),
        ]
    )


def _fleet_default(fleet: Fleet, name: str) -> str:
    attr = PLAN_FIELDS.get(name)
    value = getattr(fleet, attr) if attr else None
    return "" if value is None else f"fleet: {value:g}"


def _read_only_note() -> html.P:
    """A viewer's one line over the disabled editor: who they are and whom to ask."""
    who = principal.current()
    name = f" ({who.name})" if who is not None and who.via != "open" else ""
    return html.P(
        f"Read-only: you are a viewer{name}. Only admins change engine profiles: ask one, or "
        "use PUT /api/engines/{name} with an admin token.",
        id=ids.RIGHTSIZING_READ_ONLY,
        className="readonly-note",
    )


def _editor(engine: str, profile: dict, editable: bool = True, fleet: Fleet = Fleet()) -> html.Div:
    # A viewer sees the same form, every field disabled (greyed, static/readonly.css) and
    # one note saying why, rather than controls that would only be refused.
    off = not editable
    fields = []
    for name, label, options in SELECT_FIELDS:
        fields.append(
            html.Label(
                [
                    html.Span(label),
                    dcc.Dropdown(
                        options=list(options),
                        value=profile.get(name),
                        clearable=False,
                        id={"type": "rs-field", "name": name},
                        disabled=off,
                    ),
                ]
            )
        )
    plan_fields: list[html.Label] = []
    for name, label in NUMBER_FIELDS:
        field = _number(name, label, profile.get(name), _fleet_default(fleet, name), off)
        (plan_fields if name in PLAN_FIELDS else fields).append(field)
    return html.Div(
        [
            html.H3(f"Profile of {engine}"),
            *([_read_only_note()] if off else []),
            html.Div(fields, className="editor-grid"),
            html.H4("Replicas, latency targets (SLO) and money"),
            html.P(
                "Empty fields take the fleet's defaults (the TOKENSHAPE_SLO_* and "
                "TOKENSHAPE_COST_PER_GPU_HOUR settings, shown greyed); replicas running today "
                "is what plans and savings count from.",
                className="muted",
            ),
            html.Div(plan_fields, className="editor-grid"),
            html.Label(
                [
                    html.Span("Hugging Face model id (model 'hf'): org/name"),
                    dcc.Input(
                        type="text",
                        value=profile.get("hf_model"),
                        id={"type": "rs-field", "name": "hf_model"},
                        disabled=off,
                    ),
                ]
            ),
            html.Label(
                [
                    html.Span(
                        "config.json (optional, model 'hf'): paste the model's config.json for "
                        "an architecture tokenshape does not know, or a quantized checkpoint's"
                    ),
                    dcc.Textarea(
                        id={"type": "rs-field", "name": "hf_config"},
                        placeholder='{"architectures": ["LlamaForCausalLM"], "hidden_size": …}',
                        className="startup-log",
                        disabled=off,
                    ),
                ]
            ),
            html.Label(
                [
                    html.Span(
                        "engine startup log (optional): paste the lines with the KV cache size; "
                        "the measured capacity then replaces the estimate"
                    ),
                    dcc.Textarea(
                        id={"type": "rs-field", "name": "startup_log"},
                        placeholder="INFO ... GPU KV cache size: 476,016 tokens",
                        className="startup-log",
                        disabled=off,
                    ),
                ]
            ),
            html.Div(
                [
                    html.Button(
                        "Save profile",
                        id=ids.RIGHTSIZING_SAVE,
                        className="primary",
                        disabled=not editable,
                    ),
                    # Destructive: the browser asks first (submit_n_clicks fires on OK only).
                    dcc.ConfirmDialogProvider(
                        html.Button("Delete profile", className="danger", disabled=not editable),
                        id=ids.RIGHTSIZING_DELETE,
                        message="Delete this engine's profile? Its bounds, replicas, SLO and "
                        "prices go; the traffic stays. Its last version is kept: Undo on the "
                        "next page (or tokenshape engine restore) brings it back.",
                    ),
                    # Empty for a viewer too: the note above the fields says it once.
                    html.Span("", id=ids.RIGHTSIZING_SAVED, className="muted"),
                ],
                className="editor-actions",
            ),
            dcc.Store(id=ids.RIGHTSIZING_ENGINE, data=engine),
            dcc.Location(id=ids.RIGHTSIZING_RELOAD, refresh=True),
        ],
        id=ids.RIGHTSIZING_EDITOR,
        className="card editor readonly" if off else "card editor",
    )


def _window(query: dict, now: datetime) -> tuple[datetime, datetime, str, str]:
    """The URL's window (start, end) and its window and coverage keys."""
    # Each a key of its table: a str.
    window = cast(str, query.get("window")) if query.get("window") in WINDOWS else "7d"
    coverage = cast(str, query.get("coverage")) if query.get("coverage") in COVERAGES else "0.999"
    start, end = window_to(now, WINDOWS[window])
    given = filterbar.parse_query(
        {"window": "custom", "start": query.get("start"), "end": query.get("end")}, now
    )
    if given.start and given.end:  # a link from the weekly email: exactly its week
        start, end = given.start, given.end
    return start, end, window, coverage


def query_problems(query: dict, now: datetime) -> list[str]:
    """What is wrong with the page's query parameters, one sentence each naming the parameter,
    what it was and what is allowed (the page then shows its default, and says so)."""
    out = []
    window = query.get("window")
    if window not in (None, "", *WINDOWS):
        out.append(
            f"window: {str(window)[:40]!r} is not allowed; use one of {', '.join(WINDOWS)} "
            "(showing the last 7d)"
        )
    coverage = query.get("coverage")
    if coverage not in (None, "", *COVERAGES):
        allowed = ", ".join(f"{k} ({v})" for k, v in COVERAGES.items())
        out.append(
            f"coverage: {str(coverage)[:40]!r} is not allowed; use one of {allowed}, the share "
            "of requests the bounds must fit (showing 0.999)"
        )
    start, end = query.get("start"), query.get("end")
    if start or end:
        given = filterbar.parse_query({"window": "custom", "start": start, "end": end}, now)
        if not (given.start and given.end):
            out.append(
                "start and end: give both as ISO 8601 times, start before end (e.g. "
                "start=2026-11-16T00:00:00Z&end=2026-11-23T00:00:00Z); showing the window above"
            )
    return out


def layout_for(
    db: Database,
    query: dict,
    now: datetime,
    editable: bool = True,
    tz: str = "UTC",
    fleet: Fleet = Fleet(),
) -> html.Div:
    """The page for a URL query: the fleet, or one engine; `tz` and `fleet` (the settings'
    defaults) for its replicas under the SLO and money."""
    engine = query.get("engine") or None
    start, end, window, coverage = _window(query, now)
    profiles = profile_store.stored_profiles(db)
    seen = filterbar.choices(db).get("engine", [])
    engines = sorted(set(profiles) | set(seen))
    parts: list = [html.H2("Rightsizing"), _form(engines, engine, window, coverage)]
    problems = query_problems(query, now)
    if problems:  # never a silent fallback: say which parameter, and what is allowed
        parts.append(
            html.Div(
                [html.P(p) for p in problems],
                className="verdict does-not-fit rightsizing-query-error",
                role="alert",
            )
        )
    if query.get("saved"):
        parts.append(html.P("Profile saved; the numbers below use it.", className="saved"))
    if query.get("deleted"):
        parts.append(_deleted_note(str(query["deleted"]), editable))
    if query.get("restored") and engine:
        parts.append(
            html.P(
                f"Profile of {engine} restored; the numbers below use it.",
                className="saved",
                id=ids.RIGHTSIZING_RESTORED,
            )
        )
    if not engine:
        parts += _raw_only(window_note(db, None, start, end, now))
        parts.append(_fleet(db, query))
        return html.Div(parts)
    stored = profiles.get(engine)
    if stored is None:
        parts.append(
            html.Div(
                [
                    html.H3(f"{engine} has no profile yet"),
                    html.P(
                        "Say what it runs on and how it was built; the recommendation appears "
                        "as soon as the profile is saved."
                    ),
                ],
                className="empty",
                id=ids.RIGHTSIZING_VERDICT,
            )
        )
        starter = EngineProfile(model="llama-3.1-8b", gpu="H100")  # the editor's defaults
        parts.append(_editor(engine, starter.model_dump(), editable, fleet))
        return html.Div(parts)
    try:
        profile = load_profile(db, engine)
    except NoProfile as exc:  # stored before a catalog change, say: show it, let it be fixed
        parts.append(
            html.Div(str(exc), className="verdict does-not-fit", id=ids.RIGHTSIZING_VERDICT)
        )
        parts.append(_editor(engine, stored, editable, fleet))
        return html.Div(parts)
    try:
        parts += _engine_parts(db, engine, profile, stored, start, end, coverage, now, tz, fleet)
    except Exception as exc:  # its own error, and the editor to fix it with
        parts.append(
            html.Div(
                profile_store.sizing_failure(engine, exc),
                className="verdict does-not-fit",
                id=ids.RIGHTSIZING_VERDICT,
            )
        )
    parts.append(_editor(engine, profile.model_dump(), editable, fleet))
    return html.Div(parts)


def _engine_parts(
    db: Database,
    engine: str,
    profile: EngineProfile,
    stored: dict,
    start: datetime,
    end: datetime,
    coverage: str,
    now: datetime,
    tz: str,
    fleet: Fleet,
) -> list:
    """An engine's verdict, replicas, bounds, memory, heat map, commands, drift."""
    parts: list = []
    r = recommend(
        db,
        engine,
        start=start,
        end=end,
        coverage=float(coverage),
        profile=profile,
        tz=tz,
        fleet=fleet,
    )
    state = engine_status(r)
    parts.append(
        html.Div(
            [status_badge(state), f" — {state.reason}. ", r.verdict],
            className=f"verdict {r.status}",
            id=ids.RIGHTSIZING_VERDICT,
        )
    )
    if r.warnings:
        parts.append(
            html.Ul(
                [html.Li(f"Warning: {w}") for w in r.warnings],
                className="notes field-error rightsizing-warnings",
            )
        )
    parts.append(_replay_links(engine, start, end))
    parts += _raw_only(window_note(db, engine, start, end, now))
    if r.status == "ok":
        parts.append(_replicas_block(r, engine))
        hm = shapes.heatmap(db.cursor(), Filter(start=start, end=end, engines=(engine,)))
        lines = [Bounds("current", r.current.max_input_len, r.current.max_seq_len, CURRENT_COLOUR)]
        assert r.recommended is not None
        lines.append(
            Bounds(
                "recommended",
                r.recommended.max_input_len,
                r.recommended.max_seq_len,
                RECOMMENDED_COLOUR,
            )
        )
        parts += [
            html.Div(
                [
                    html.Div([html.H3("Bounds"), _bounds_table(r)]),
                    html.Div([html.H3("Memory of one replica"), _memory(r)]),
                ],
                className="two-col",
            ),
            html.Div(
                [
                    html.H3(f"{engine}: requests and both sets of bounds"),
                    dcc.Graph(
                        id=ids.RIGHTSIZING_HEATMAP,
                        figure=heatmap_figure(hm, bounds=lines),
                        config={"displaylogo": False},
                    ),
                ],
                className="card",
            ),
            html.Div(
                [
                    html.Div([html.H3("Commands"), _commands(r)]),
                    html.Div([html.H3("What if"), _whatif(r)]),
                ],
                className="two-col",
            ),
            performance_panel.panel(db, engine, profile, start, end),
        ]
    elif r.memory_now is not None:
        parts.append(html.Div([html.H3("Memory of one replica"), _memory(r)]))
        if r.whatifs:
            parts.append(html.Div([html.H3("What if"), _whatif(r)]))
    if r.notes:
        parts.append(html.Ul([html.Li(n) for n in r.notes], className="notes"))
    parts.append(
        drift_panel(engine_drift(db, engine, stored, now), title="Drift of the last 7 days")
    )
    if drift := drift_note(db, engine, now, now):
        parts.append(
            html.P(f"Drift: {drift}", className="muted", id=ids.RIGHTSIZING_DRIFT_RAW_ONLY)
        )
    return parts


def _replay_links(engine: str, start: datetime, end: datetime) -> html.P:
    """Links to replay the engine's peak hour of the window as a benchmark, and to compare one."""
    # Its ok requests: a failed one carries no token counts to replay.
    export = {"format": "mooncake", "engine": engine, "peak": "1", "status": "ok"}
    export |= {"start": start.isoformat(), "end": end.isoformat()}
    return html.P(
        [
            html.A(
                "Export this engine's peak hour for a replay",
                href="/api/export?" + urlencode(export),
                id=ids.RIGHTSIZING_EXPORT,
            ),
            " · ",
            dcc.Link(
                "Compare a benchmark with production",
                href="/compare?" + urlencode({"engine": engine}),
                id=ids.RIGHTSIZING_COMPARE,
            ),
        ],
        className="muted",
    )


def _raw_only(note: str | None) -> list[html.Div]:
    """The window's raw-only caption (bounds, replicas and drift read raw rows only), if any."""
    return (
        [html.Div(note, className="verdict no-data", id=ids.RIGHTSIZING_RAW_ONLY)] if note else []
    )


def _typed_fields(values: dict) -> dict:
    """The form's fields once each has its box's type: a number box a number, every other a
    string (the request's own values: a script may send anything; 422 names the field)."""
    numbers = {name for name, _ in NUMBER_FIELDS}
    for name, value in values.items():
        number = name in numbers
        ok = (
            value is None
            or (number and isinstance(value, int | float) and not isinstance(value, bool))
            or (not number and isinstance(value, str))
        )
        if not ok:
            raise edge.refuse(
                422,
                f'input {{"name":"{name}","type":"rs-field"}}.value: expected '
                f"{'a number' if number else 'text'}, got {type(value).__name__}",
            )
    return values


def save_profile(db: Database, engine: str, values: dict, now: datetime) -> str | None:
    """Validate and store an edited profile; the error message (naming the field) if invalid."""
    data = {k: v for k, v in values.items() if k != "startup_log"}
    try:
        profile_store.save_profile(db, engine, data, values.get("startup_log"), now, merge=True)
    except ValueError as exc:
        return str(exc)
    return None


def _deleted_note(engine: str, editable: bool) -> html.Div:
    """The note "Profile of X deleted." with, for admins, the Undo that restores it."""
    undo = (
        [
            html.Button("Undo", id=ids.RIGHTSIZING_UNDO, n_clicks=0, className="primary"),
            dcc.Store(id=ids.RIGHTSIZING_UNDO_ENGINE, data=engine),
            html.Span("", id=ids.RIGHTSIZING_UNDO_RESULT, role="status"),
            dcc.Location(id=ids.RIGHTSIZING_UNDO_RELOAD, refresh=True),
        ]
        if editable
        else []
    )
    return html.Div(
        [html.Span(f"Profile of {engine} deleted. ", className="saved"), *undo],
        id=ids.RIGHTSIZING_DELETED,
    )


def restore_profile(db: Database, engine: str, now: datetime) -> str | None:
    """Restore a deleted profile (Undo); the refusal in words (a newer profile exists, or
    nothing to restore), or None."""
    try:
        profile_store.restore_profile(db, engine, now)
    except (profile_store.RestoreConflict, profile_store.NoDeletedProfile) as exc:
        return str(exc)
    return None


READ_ONLY = (
    "Only admins can change engine profiles: ask one, or use PUT /api/engines/{name} with an "
    "admin token."
)


def register(
    app: Dash,
    db: Database,
    clock: Callable[[], datetime],
    tz: str = "UTC",
    fleet: Fleet = Fleet(),
) -> None:
    """Register the page at /rightsizing, the callbacks that fill the fleet's and an engine's
    replicas and money, and the profile editor's save and delete callbacks."""
    register_page(
        __name__,
        "/rightsizing",
        "Rightsizing",
        4,
        lambda **query: layout_for(db, query, clock(), principal.is_admin(), tz, fleet),
    )

    @app.callback(
        Output(ids.RIGHTSIZING_FLEET, "children"),
        Input(ids.RIGHTSIZING_FLEET_QUERY, "data"),
    )
    async def _fleet_rows(query: Query | None):  # type: ignore[no-untyped-def]
        # The query is the client's: parsed and validated exactly as the page's URL is.
        clean = {k: v for k, v in (query or {}).items() if isinstance(v, str)}
        return await asyncio.to_thread(fleet_rows, db, clean, clock(), tz, fleet)

    @app.callback(
        Output(ids.RIGHTSIZING_MONEY, "children"),
        Input(ids.RIGHTSIZING_MONEY_QUERY, "data"),
    )
    async def _money(query: EngineData | None):  # type: ignore[no-untyped-def]
        engine = query["engine"] if query else ""
        if not engine:
            return dash.no_update
        return await asyncio.to_thread(
            money_panel.for_engine, db, engine, clock(), tz, fleet, MONEY_WEEKS
        )

    save_counter = itertools.count(1)
    names = [name for name, _, _ in SELECT_FIELDS] + [name for name, _ in NUMBER_FIELDS]
    names += ["hf_model", "hf_config", "startup_log"]

    @app.callback(
        Output(ids.RIGHTSIZING_SAVED, "children"),
        Output(ids.RIGHTSIZING_RELOAD, "href"),
        Input(ids.RIGHTSIZING_SAVE, "n_clicks"),
        State(ids.RIGHTSIZING_ENGINE, "data"),
        *[State({"type": "rs-field", "name": name}, "value") for name in names],
        State(ids.RIGHTSIZING_RELOAD, "href"),
        prevent_initial_call=True,
    )
    async def _save(_clicks: int | None, engine: str | None, *rest: FieldValue):  # type: ignore[no-untyped-def]
        if not principal.is_admin():  # checked here too: a request can skip the page
            return READ_ONLY, dash.no_update
        *values, last = rest
        href = last if isinstance(last, str) else None
        fields = _typed_fields(dict(zip(names, values, strict=True)))
        error = await asyncio.to_thread(save_profile, db, engine or "", fields, clock())
        if error:
            return error, dash.no_update
        base = (href or "/rightsizing?" + urlencode({"engine": engine})).split("&saved=")[0]
        # Unique per save: two saves within one second must still differ, or the Location
        # sees the same href and does not reload.
        stamp = f"{int(clock().timestamp())}-{next(save_counter)}"
        return "saved", f"{base}{'&' if '?' in base else '?'}saved={stamp}"

    @app.callback(
        Output(ids.RIGHTSIZING_SAVED, "children", allow_duplicate=True),
        Output(ids.RIGHTSIZING_RELOAD, "href", allow_duplicate=True),
        Input(ids.RIGHTSIZING_DELETE, "submit_n_clicks"),
        State(ids.RIGHTSIZING_ENGINE, "data"),
        prevent_initial_call=True,
    )
    async def _delete(_clicks: int | None, engine: str | None):  # type: ignore[no-untyped-def]
        if not principal.is_admin():
            return READ_ONLY, dash.no_update
        if not engine:
            return "Choose an engine to delete.", dash.no_update
        now = clock()  # the history records the injected clock's time
        await asyncio.to_thread(lambda: profile_store.delete_profile(db, engine, now))
        return "deleted", "/rightsizing?" + urlencode({"deleted": engine})

    @app.callback(
        Output(ids.RIGHTSIZING_UNDO_RESULT, "children"),
        Output(ids.RIGHTSIZING_UNDO_RELOAD, "href"),
        Input(ids.RIGHTSIZING_UNDO, "n_clicks"),
        State(ids.RIGHTSIZING_UNDO_ENGINE, "data"),
        prevent_initial_call=True,
    )
    async def _undo(n_clicks: int | None, engine: str | None):  # type: ignore[no-untyped-def]
        if not n_clicks or not isinstance(engine, str):
            return dash.no_update, dash.no_update
        if not principal.is_admin():
            return READ_ONLY, dash.no_update
        problem = await asyncio.to_thread(restore_profile, db, engine, clock())
        if problem:
            return problem, dash.no_update
        stamp = f"{int(clock().timestamp())}-{next(save_counter)}"
        return "restored", "/rightsizing?" + urlencode({"engine": engine, "restored": stamp})
