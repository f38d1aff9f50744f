"""Rightsizing page: per engine, observed vs current vs recommended bounds, memory, commands.

Without an engine in the URL it lists every profiled engine with its verdict. The profile
editor at the bottom saves through a callback and reloads the page with the new numbers."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import cast, get_args
from urllib.parse import urlencode

import dash
from dash import Dash, Input, Output, State, dcc, html

from app.analytics import shapes
from app.analytics.filters import Filter
from app.auth import principal
from app.charts.heatmap import Bounds, heatmap_figure
from app.charts.memory import memory_figure
from app.dashboard import filterbar, ids
from app.dashboard.findings import drift_panel
from app.dashboard.pages import performance_panel, register_page
from app.services import profiles as profile_store
from app.services.profiles import NoProfile, load_profile
from app.services.rightsizing import (
    engine_drift,
    recommend,
)
from app.sizing.catalog import GIB, GPUS, MODELS
from app.sizing.profile import EngineProfile, KvDtype, WeightDtype
from app.sizing.rightsize import Recommendation
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
    ("cost_per_gpu_hour", "cost per GPU-hour"),
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


def _fleet(db: Database, start: datetime, end: datetime, coverage: float) -> html.Div | html.Table:
    rows = []
    for name, stored in profile_store.stored_profiles(db).items():
        try:
            r = recommend(db, name, start=start, end=end, coverage=coverage)
            verdict, status = r.verdict, r.status
        except NoProfile as exc:  # a stored profile that is no longer valid
            verdict, status = str(exc), "invalid"
        rows.append(
            html.Tr(
                [
                    html.Td(dcc.Link(name, href="/rightsizing?" + urlencode({"engine": name}))),
                    html.Td(stored.get("model", "")),
                    html.Td(
                        f"{stored.get('tensor_parallel', 1) * stored.get('pipeline_parallel', 1)}× "
                        f"{stored.get('gpu', '')}"
                    ),
                    html.Td(status),
                    html.Td(verdict, className="verdict-cell"),
                ]
            )
        )
    if not rows:
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
    head = html.Thead(html.Tr([html.Th(h) for h in ("engine", "model", "GPUs", "status", "")]))
    return html.Table([head, html.Tbody(rows)], className="grid fleet", id=ids.RIGHTSIZING_FLEET)


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
                        f"{_n(cap.worst)} full-length · {_n(cap.expected)} expected",
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


def _whatif(r: Recommendation) -> html.Table:
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
                html.Td(f"{_n(w.capacity.worst)} / {_n(w.capacity.expected)}"),
                html.Td(note, className="muted"),
            ]
        rows.append(html.Tr(cells))
    head = html.Tr(
        [html.Th(h) for h in ("what if", "KV tokens", "full-length / expected", "caveat")]
    )
    return html.Table(
        [html.Thead(head), html.Tbody(rows)], className="grid", id=ids.RIGHTSIZING_WHATIF
    )


def _editor(engine: str, profile: dict, editable: bool = True) -> html.Div:
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
                    ),
                ]
            )
        )
    for name, label in NUMBER_FIELDS:
        fields.append(
            html.Label(
                [
                    html.Span(label),
                    dcc.Input(
                        type="number",
                        value=profile.get(name),
                        id={"type": "rs-field", "name": name},
                    ),
                ]
            )
        )
    return html.Div(
        [
            html.H3(f"Profile of {engine}"),
            html.Div(fields, className="editor-grid"),
            html.Label(
                [
                    html.Span("Hugging Face model id (model 'hf'): org/name"),
                    dcc.Input(
                        type="text",
                        value=profile.get("hf_model"),
                        id={"type": "rs-field", "name": "hf_model"},
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
                    html.Button(
                        "Delete profile",
                        id=ids.RIGHTSIZING_DELETE,
                        className="danger",
                        disabled=not editable,
                    ),
                    html.Span(
                        "" if editable else READ_ONLY, id=ids.RIGHTSIZING_SAVED, className="muted"
                    ),
                ],
                className="editor-actions",
            ),
            dcc.Store(id=ids.RIGHTSIZING_ENGINE, data=engine),
            dcc.Location(id=ids.RIGHTSIZING_RELOAD, refresh=True),
        ],
        id=ids.RIGHTSIZING_EDITOR,
        className="card editor",
    )


def layout_for(db: Database, query: dict, now: datetime, editable: bool = True) -> html.Div:
    """The page for a URL query: the fleet, or one engine."""
    engine = query.get("engine") or None
    # Each a key of its table: a str.
    window = cast(str, query.get("window")) if query.get("window") in WINDOWS else "7d"
    coverage = cast(str, query.get("coverage")) if query.get("coverage") in COVERAGES else "0.999"
    start, end = now - WINDOWS[window], now
    given = filterbar.parse_query(
        {"window": "custom", "start": query.get("start"), "end": query.get("end")}, now
    )
    if given.start and given.end:  # a link from the weekly email: exactly its week
        start, end = given.start, given.end
    profiles = profile_store.stored_profiles(db)
    seen = filterbar.choices(db).get("engine", [])
    engines = sorted(set(profiles) | set(seen))
    parts: list = [html.H2("Rightsizing"), _form(engines, engine, window, coverage)]
    if query.get("saved"):
        parts.append(html.P("Profile saved; the numbers below use it.", className="saved"))
    if query.get("deleted"):
        parts.append(html.P(f"Profile of {query['deleted']} deleted.", className="saved"))
    if not engine:
        parts.append(_fleet(db, start, end, float(coverage)))
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
        parts.append(_editor(engine, starter.model_dump(), editable))
        return html.Div(parts)
    try:
        profile = load_profile(db, engine)
    except NoProfile as exc:  # stored before a catalog change, say: show it, let it be fixed
        parts.append(
            html.Div(str(exc), className="verdict does-not-fit", id=ids.RIGHTSIZING_VERDICT)
        )
        parts.append(_editor(engine, stored, editable))
        return html.Div(parts)
    r = recommend(db, engine, start=start, end=end, coverage=float(coverage), profile=profile)
    parts.append(html.Div(r.verdict, className=f"verdict {r.status}", id=ids.RIGHTSIZING_VERDICT))
    if r.status == "ok":
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
    parts.append(_editor(engine, profile.model_dump(), editable))
    return html.Div(parts)


def save_profile(db: Database, engine: str, values: dict, now: datetime) -> str | None:
    """Validate and store an edited profile; the error message (naming the field) if invalid."""
    data = {k: v for k, v in values.items() if k != "startup_log"}
    try:
        profile_store.save_profile(db, engine, data, values.get("startup_log"), now, merge=True)
    except ValueError as exc:
        return str(exc)
    return None


READ_ONLY = (
    "Only admins can change engine profiles: ask one, or use PUT /api/engines/{name} with an "
    "admin token."
)


def register(app: Dash, db: Database, clock: Callable[[], datetime]) -> None:
    """Register the page at /rightsizing and the profile editor's save and delete callbacks."""
    register_page(
        __name__,
        "/rightsizing",
        "Rightsizing",
        4,
        lambda **query: layout_for(db, query, clock(), principal.is_admin()),
    )
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
    async def _save(_clicks, engine, *rest):
        if not principal.is_admin():  # checked here too: a request can skip the page
            return READ_ONLY, dash.no_update
        *values, href = rest
        error = await asyncio.to_thread(
            save_profile, db, engine, dict(zip(names, values, strict=True)), clock()
        )
        if error:
            return error, dash.no_update
        base = (href or "/rightsizing?" + urlencode({"engine": engine})).split("&saved=")[0]
        stamp = int(clock().timestamp())
        return "saved", f"{base}{'&' if '?' in base else '?'}saved={stamp}"

    @app.callback(
        Output(ids.RIGHTSIZING_SAVED, "children", allow_duplicate=True),
        Output(ids.RIGHTSIZING_RELOAD, "href", allow_duplicate=True),
        Input(ids.RIGHTSIZING_DELETE, "n_clicks"),
        State(ids.RIGHTSIZING_ENGINE, "data"),
        prevent_initial_call=True,
    )
    async def _delete(_clicks, engine):
        if not principal.is_admin():
            return READ_ONLY, dash.no_update
        await asyncio.to_thread(lambda: profile_store.delete_profile(db, engine))
        return "deleted", "/rightsizing?" + urlencode({"deleted": engine})
