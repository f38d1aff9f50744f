"""An engine's plans in money, shared by the Rightsizing and Seasonal pages: replicas at the
peak, GPU-hours and cost per month per plan, the best one, and the cost per million tokens
next to an API's price (app/services/economics)."""

from __future__ import annotations

from datetime import datetime

from dash import html
from dash.development.base_component import Component

from app.services.economics import EngineMoney, engine_money
from app.services.profiles import sizing_failure
from app.sizing.slo import Fleet, money
from app.storage.database import Database


def _price(value: float | None, currency: str) -> str:
    if value is None:
        return "–"
    return f"{currency}{value:,.2f}" if len(currency) == 1 else f"{value:,.2f} {currency}"


def plans_table(
    m: EngineMoney, bindings: dict[str, str] | None = None, table_id: str | None = None
) -> html.Table:
    """One row per plan: replicas at the peak, GPU-hours and cost per month, the change
    against the baseline, and (given) what set its replicas; the best plan in bold."""
    cur = m.currency
    base = m.baseline
    best = m.best.name if m.best else ""
    rows = []
    for p in m.plans:
        change = "–"
        if base is not None and p.name != base.name:
            fewer = base.gpu_hours_month - p.gpu_hours_month
            if p.cost_month is not None and base.cost_month is not None:
                amount = money(abs(base.cost_month - p.cost_month), cur)
                change = f"saves {amount}" if fewer >= 0 else f"costs {amount} more"
            else:
                change = f"{fewer:+,.0f} GPU-h"
        name = html.Strong(p.name) if p.name == best else p.name
        cells = [
            html.Td([name, html.Span(f" {p.label}", className="muted")]),
            html.Td(f"{p.peak_replicas}"),
            html.Td(f"{p.gpu_hours_month:,.0f}"),
            html.Td(money(p.cost_month, cur) or "–"),
            html.Td(change),
        ]
        if bindings is not None:
            cells.append(
                html.Td(
                    bindings.get(p.name, "").removeprefix("replicas set by "),
                    className="muted",
                    style={"textAlign": "left"},
                )
            )
        rows.append(html.Tr(cells))
    head = [
        "plan",
        "replicas at peak",
        "GPU-hours / month",
        "cost / month",
        "vs " + (base.name if base else "now"),
    ]
    if bindings is not None:
        head.append("replicas set by")
    content = [html.Thead(html.Tr([html.Th(h) for h in head])), html.Tbody(rows)]
    if table_id:
        return html.Table(content, className="grid", id=table_id)
    return html.Table(content, className="grid")


def token_costs(m: EngineMoney) -> html.P | None:
    """'Cost per million tokens: input $0.12 (API $0.60), output …' or None when unknown."""
    if m.input_per_mtok is None and m.output_per_mtok is None:
        return None
    cur = m.currency
    api_in, api_out = m.api_prices

    def pair(own: float | None, api: float | None) -> str:
        text = _price(own, cur)
        return f"{text} (API {_price(api, cur)})" if api is not None else text

    tail = ""
    if m.api_month is not None:
        tail = f" The same tokens at the API's price: {money(m.api_month, cur)} a month."
    elif api_in is None or api_out is None:
        tail = (
            " Set the API prices (profile, or TOKENSHAPE_API_PRICE_INPUT_PER_MTOK and "
            "TOKENSHAPE_API_PRICE_OUTPUT_PER_MTOK) to compare."
        )
    base = m.baseline.label if m.baseline else "today's"
    return html.P(
        [
            html.Strong("Cost per million tokens"),
            f" ({base}): input {pair(m.input_per_mtok, api_in)}, output "
            f"{pair(m.output_per_mtok, api_out)}.{tail}",
        ]
    )


def view(
    m: EngineMoney,
    tz: str,
    weeks: int,
    bindings: dict[str, str] | None = None,
    table_id: str | None = None,
) -> list[Component]:
    """The money verdict, the plans table, the token costs and where the figures come from."""
    if m.error or not m.plans:
        return [html.P(f"No plans in money: {m.error or m.verdict}", className="muted")]
    saves = (m.saves_month or 0) > 0 or m.saves_gpu_hours_month >= 1
    out: list[Component] = [
        html.Div(m.verdict, className="verdict ok" if saves else "verdict no-data"),
        plans_table(m, bindings, table_id),
    ]
    costs = token_costs(m)
    if costs is not None:
        out.append(costs)
    if m.cost_per_gpu_hour is None:
        out.append(
            html.P(
                "No cost per GPU-hour: set it in the profile or with "
                "TOKENSHAPE_COST_PER_GPU_HOUR to see money (GPU-hours meanwhile).",
                className="muted",
            )
        )
    notes = [
        *m.notes,
        f"plans over the last {weeks} whole weeks, hours in {tz}; a month is 365.25 / 12 days",
    ]
    out.append(html.Ul([html.Li(n) for n in notes], className="notes"))
    return out


def for_engine(
    db: Database, engine: str, now: datetime, tz: str, fleet: Fleet, weeks: int
) -> list[Component]:
    """The money view of an engine (its seasonal plans computed, or cached a few minutes)."""
    try:
        m = engine_money(db, engine, now=now, tz=tz, fleet=fleet, weeks=weeks)
    except Exception as exc:  # the engine's own error, never a blank page
        return [html.P(f"No plans in money: {sizing_failure(engine, exc)}", className="muted")]
    return view(m, tz, weeks)
