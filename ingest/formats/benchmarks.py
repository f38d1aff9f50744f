"""Benchmark runs as records: GenAI-Perf's profile_export.json and AIPerf's profile_export.jsonl.

So a benchmark can sit next to production traffic on the same pages (its gateway name, e.g.
"genai-perf", tells them apart). Token counts that the tool does not report are estimated and
marked `tokens_estimated`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from pathlib import Path

UNIT_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "ms": 1.0, "s": 1000.0, "sec": 1000.0}
CHARS_PER_TOKEN = 4  # the usual estimate for English text with BPE tokenizers


class BenchmarkFormatError(ValueError):
    """The file is not in the expected benchmark format; names the format and the field."""


class _BadField(ValueError):
    """One request's field has the wrong type: that request is a reject naming it."""

    def __init__(self, field: str, message: str):
        super().__init__(message)
        self.field = field


# A row holding this key is a reject: (field, message), not a record (ingest/formats/files.py).
REJECT = "_reject"


def _reject_row(request_id: str, exc: _BadField) -> dict:
    return {"request_id": request_id, REJECT: (exc.field, str(exc))}


def _kind(value: object) -> str:
    return "null" if value is None else type(value).__name__


def _is_number(value: object) -> bool:
    """A JSON number (a boolean is not one)."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _scaled(value: float, divisor: float) -> float:
    """value / divisor, infinite (and so refused by the record rules) when it overflows."""
    try:
        return value / divisor
    except OverflowError:  # an integer too large for a float
        return math.inf if value > 0 else -math.inf


def _times(value: float, factor: float) -> float:
    """value * factor, infinite (and so refused by the record rules) when it overflows."""
    try:
        return value * factor
    except OverflowError:
        return math.inf if value > 0 else -math.inf


def _label(value: object) -> str:
    """A value as text for an error type: at most 256 characters, whatever it is."""
    if isinstance(value, str):
        return value[:256]
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= 10**256:
        return "a very large number"
    return str(value)[:256]


def _text_tokens(text: str) -> int:
    return max(1, round(len(text) / CHARS_PER_TOKEN)) if text else 0


def _prompt_text(payload: object) -> tuple[str, str | None]:
    """The prompt text and the model of a GenAI-Perf request payload (OpenAI chat/completions)."""
    if isinstance(payload, str):
        text = payload
        try:
            payload = json.loads(text)
        except ValueError:
            return text, None
    if not isinstance(payload, dict):
        return "", None
    model = payload.get("model") if isinstance(payload.get("model"), str) else None
    if isinstance(payload.get("messages"), list):
        parts = []
        for m in payload["messages"]:
            content = m.get("content") if isinstance(m, dict) else None
            if isinstance(content, str):
                parts.append(content)
            elif isinstance(content, list):  # content parts
                for c in content:
                    text = c.get("text", "") if isinstance(c, dict) else ""
                    if not isinstance(text, str):
                        raise _BadField(
                            "request_inputs",
                            "genai-perf: request_inputs: a message content part's text must "
                            f"be a string, got {_kind(text)}",
                        )
                    parts.append(text)
        return "\n".join(parts), model
    for key in ("prompt", "text_input"):
        if isinstance(payload.get(key), str):
            return payload[key], model
    return "", model


def _response_text(outputs: object) -> str:
    """The generated text of a request's streamed responses (OpenAI SSE chunks)."""
    parts = []
    for out in outputs if isinstance(outputs, list) else []:
        raw = out.get("response", "") if isinstance(out, dict) else ""
        for line in str(raw).splitlines():
            line = line.removeprefix("data:").strip()
            if not line or line == "[DONE]":
                continue
            try:
                chunk = json.loads(line)
            except ValueError:
                continue
            for choice in chunk.get("choices", []) if isinstance(chunk, dict) else []:
                delta = choice.get("delta") or {}
                text = delta.get("content") if isinstance(delta, dict) else None
                text = text if isinstance(text, str) else choice.get("text")
                if isinstance(text, str):
                    parts.append(text)
    return "".join(parts)


def genai_perf_rows(
    path: Path, model: str | None, tokenizer: Path | None = None
) -> Iterator[tuple[int, list[dict]]]:
    """GenAI-Perf: experiments[].requests[] with `timestamp` and `response_timestamps[]` (ns).

    TTFT = first response − timestamp, E2E = last response − timestamp, per-token gaps = the
    differences between responses. GenAI-Perf's export has no token counts: with a local
    tokenizer (a Hugging Face tokenizer.json) ISL and OSL are counted from the prompt and the
    streamed text; without one OSL is the number of streamed responses and ISL the prompt's
    characters / 4, both marked estimated."""
    counter = None
    if tokenizer is not None:
        try:
            from tokenizers import Tokenizer
        except ImportError:  # an optional extra (pyproject.toml): the server does without it
            raise BenchmarkFormatError(
                "genai-perf: --tokenizer needs the tokenizers package, which is not installed: "
                "pip install 'tokenshape[tokenizer]' (or drop --tokenizer to estimate tokens)"
            ) from None
        try:
            counter = Tokenizer.from_file(str(tokenizer))
        except Exception as exc:  # the library raises its own exception types
            raise BenchmarkFormatError(
                f"genai-perf: cannot load the tokenizer {tokenizer} ({exc}); pass a Hugging "
                "Face tokenizer.json"
            ) from None
    try:
        data = json.loads(path.read_text())
    except ValueError as exc:
        raise BenchmarkFormatError(f"genai-perf: {path.name} is not JSON ({exc})") from None
    experiments = data.get("experiments") if isinstance(data, dict) else None
    if not isinstance(experiments, list):
        keys = ", ".join(list(data)[:8]) if isinstance(data, dict) else type(data).__name__
        raise BenchmarkFormatError(
            f"genai-perf: {path.name} has no experiments[] (found: {keys}); expected "
            "profile_export.json from GenAI-Perf's profile command"
        )
    rows: list[dict] = []
    for e, experiment in enumerate(experiments):
        requests = experiment.get("requests") if isinstance(experiment, dict) else None
        if not isinstance(requests, list):
            raise BenchmarkFormatError(f"genai-perf: experiments[{e}].requests is missing")
        for r, req in enumerate(requests):
            rid = f"{path.stem}-{e}-{r}"
            if not isinstance(req, dict) or not _is_number(req.get("timestamp")):
                rows.append({"request_id": rid, "model": None, "isl": None, "osl": None})
                continue  # rejected by the record rules, with the field named
            try:
                rows.append(_genai_perf_row(req, rid, model, counter))
            except _BadField as exc:
                rows.append(_reject_row(rid, exc))
    for start in range(0, len(rows), 50_000):
        yield start, rows[start : start + 50_000]


def _genai_perf_row(req: dict, rid: str, model: str | None, counter) -> dict:
    """One GenAI-Perf request as a row; _BadField when a field has the wrong type."""
    start = req["timestamp"]
    stamps = req.get("response_timestamps") or []
    if not isinstance(stamps, list):
        raise _BadField(
            "response_timestamps",
            f"genai-perf: response_timestamps must be a list of numbers, got {_kind(stamps)}",
        )
    stamps = [t for t in stamps if _is_number(t)]
    inputs = req.get("request_inputs") or {}
    if not isinstance(inputs, dict):
        raise _BadField(
            "request_inputs",
            f"genai-perf: request_inputs must be an object, got {_kind(inputs)}",
        )
    text, payload_model = _prompt_text(inputs.get("payload", inputs))
    row = {
        "request_id": rid,
        "started_at": _scaled(start, 1e9),
        "model": model or payload_model or "genai-perf",
        "isl": _text_tokens(text),
        "osl": len(stamps),
        "tokens_estimated": counter is None,
        "stream": len(stamps) > 1,
    }
    if counter is not None:
        row["isl"] = len(counter.encode(text).ids)
        row["osl"] = len(counter.encode(_response_text(req.get("response_outputs"))).ids)
    if stamps:
        row["ttft_ms"] = _scaled(stamps[0] - start, 1e6)
        row["e2e_ms"] = _scaled(stamps[-1] - start, 1e6)
        if len(stamps) > 1:
            gaps = [_scaled(b - a, 1e6) for a, b in zip(stamps, stamps[1:], strict=False)]
            row["token_gaps_ms"] = gaps
            row["itl_ms"] = sum(gaps) / len(gaps)
    else:
        row["status"] = "error"
        row["error_type"] = "no response"
    return row


def _ms(metric: object, name: str, line: int) -> float | list | None:
    """A metric {value, unit} in milliseconds (or tokens, unchanged)."""
    if metric is None:
        return None
    if not isinstance(metric, dict) or "value" not in metric:
        raise BenchmarkFormatError(f"aiperf: line {line}: metrics.{name} has no value")
    value, unit = metric["value"], str(metric.get("unit", "ms")).lower()
    if unit in ("tokens", "token", "count"):
        return int(value) if isinstance(value, float) and value.is_integer() else value
    if unit not in UNIT_MS:
        raise BenchmarkFormatError(f"aiperf: line {line}: metrics.{name} has unknown unit {unit}")
    scale = UNIT_MS[unit]
    if isinstance(value, list):
        return [_times(v, scale) for v in value if _is_number(v)]
    return _times(value, scale) if _is_number(value) else None


def aiperf_rows(path: Path, model: str | None) -> Iterator[tuple[int, list[dict]]]:
    """AIPerf: one JSON record per line with metadata.request_start_ns / request_end_ns and
    metrics.{input,output}_sequence_length, time_to_first_token, inter_token_latency,
    inter_chunk_latency, request_latency (each {value, unit}); `error` records are errors."""
    rows: list[dict] = []
    with path.open("r", encoding="utf-8") as fh:
        for n, line in enumerate(fh):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise BenchmarkFormatError(f"aiperf: line {n} is not JSON ({exc})") from None
            if not isinstance(rec, dict) or not isinstance(rec.get("metadata"), dict):
                raise BenchmarkFormatError(
                    f"aiperf: line {n} has no metadata object; expected profile_export.jsonl"
                )
            meta, metrics = rec["metadata"], rec.get("metrics") or {}
            if not isinstance(metrics, dict):
                rid = _label(meta.get("x_request_id") or f"{path.stem}-{n}")
                why = f"aiperf: line {n}: metrics must be an object, got {_kind(metrics)}"
                rows.append(_reject_row(rid, _BadField("metrics", why)))
                continue
            start_ns = meta.get("request_start_ns")
            row: dict = {
                "request_id": _label(meta.get("x_request_id") or f"{path.stem}-{n}"),
                "model": model or meta.get("model_name") or "aiperf",
                "isl": _ms(metrics.get("input_sequence_length"), "input_sequence_length", n),
                "osl": _ms(metrics.get("output_sequence_length"), "output_sequence_length", n),
                "ttft_ms": _ms(metrics.get("time_to_first_token"), "time_to_first_token", n),
                "itl_ms": _ms(metrics.get("inter_token_latency"), "inter_token_latency", n),
                "e2e_ms": _ms(metrics.get("request_latency"), "request_latency", n),
                "token_gaps_ms": _ms(metrics.get("inter_chunk_latency"), "inter_chunk_latency", n),
            }
            if _is_number(start_ns):
                row["started_at"] = _scaled(start_ns, 1e9)
                end_ns = meta.get("request_end_ns")
                if row["e2e_ms"] is None and _is_number(end_ns):
                    row["e2e_ms"] = _scaled(end_ns - start_ns, 1e6)
            error = rec.get("error")
            if error:
                row["status"] = "error"
                kind = error.get("type") or error.get("code") if isinstance(error, dict) else error
                row["error_type"] = _label(kind or "error")
                row["isl"] = row["isl"] or 0
                row["osl"] = row["osl"] or 0
            elif meta.get("was_cancelled"):
                row["status"] = "cancelled"
            rows.append({k: v for k, v in row.items() if v is not None})
    for start in range(0, len(rows), 50_000):
        yield start, rows[start : start + 50_000]
