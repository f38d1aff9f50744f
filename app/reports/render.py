"""The report as an email: HTML (inline styles, tables, autoescaped) and plain text parts."""

from __future__ import annotations

from email import policy
from email.message import EmailMessage
from email.utils import formatdate, make_msgid, parseaddr
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, select_autoescape

from app.reports.build import EngineSection, Report
from app.sizing.rightsize import CONCURRENCY_WORDS, Recommendation

TEMPLATES = Path(__file__).with_name("templates")
SEVERITY_COLOUR = {"critical": "#b42318", "warning": "#b7791f", "info": "#6c7a96"}


def _n(value: float | None) -> str:
    return "–" if value is None else f"{value:,.0f}"


def bounds(r: Recommendation) -> list[tuple[str, str, str, str]]:
    """The bounds table: label, observed, current, recommended."""
    t, cur, rec = r.traffic, r.current, r.recommended
    assert rec is not None
    return [
        ("max_input_len", _n(t.isl_q), _n(cur.max_input_len), _n(rec.max_input_len)),
        ("max_seq_len (ISL + OSL)", _n(t.seq_q), _n(cur.max_seq_len), _n(rec.max_seq_len)),
        ("max_batch_size", "–", _n(cur.max_batch_size), _n(rec.max_batch_size)),
        ("max_num_tokens", "–", _n(cur.max_num_tokens), _n(rec.max_num_tokens)),
        ("requests refused", "–", _n(r.rejected_current), _n(r.rejected_recommended)),
    ]


def sentence_parts(e: EngineSection) -> tuple[str, str]:
    """The manager's sentence split after its head, 'name (status)', which the HTML colours."""
    head = f"{e.name} ({e.status.label})" if e.status else e.name
    if e.sentence.startswith(head):
        return head, e.sentence[len(head) :]
    return "", e.sentence


def _env(html: bool) -> Environment:
    env = Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=select_autoescape(["html"]) if html else False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals.update(
        bounds=bounds,
        severity_colour=SEVERITY_COLOUR,
        concurrency_words=CONCURRENCY_WORDS,
        sentence_parts=sentence_parts,
    )
    return env


def render(report: Report) -> tuple[str, str]:
    """(html, text) of the report."""
    html = _env(True).get_template("report.html").render(report=report)
    text = _env(False).get_template("report.txt").render(report=report)
    return html, text


def compose(report: Report, sender: str, recipients: list[str]) -> EmailMessage:
    """A multipart/alternative message: plain text first, HTML preferred."""
    html, text = render(report)
    # Unfolded headers (up to RFC 5322's 998 characters): some clients show a folded subject
    # with a leading space.
    msg = EmailMessage(policy=policy.SMTP.clone(max_line_length=998))
    msg["Subject"] = report.subject
    msg["From"] = sender
    msg["To"] = ", ".join(recipients)
    address = parseaddr(sender)[1]
    domain = address.rsplit("@", 1)[-1] if "@" in address else "tokenshape.local"
    msg["Date"] = formatdate(localtime=False)
    msg["Message-ID"] = make_msgid(idstring=f"tokenshape-{report.week}", domain=domain)
    msg.set_content(text)
    msg.add_alternative(html, subtype="html")
    return msg
