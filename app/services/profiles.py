"""Engine profiles: the one place they are read, validated, saved, deleted and restored
(every change recorded as a version, with who made it and what changed in words).

The API, the Rightsizing page, the CLI and the email all go through here, so a profile is
validated by the same rules and stored in one serialisation (JSON, None fields left out)."""

from __future__ import annotations

import logging
import threading
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from app.auth import principal
from app.services.perfmodel import PerfModelError
from app.sizing.logparse import parse_log_facts, parse_startup_log
from app.sizing.profile import EngineProfile
from app.storage import engines
from app.storage.database import Database

log = logging.getLogger("tokenshape.profiles")
# As ingest's Name (ingest/records.py): the longest engine name a request can carry.
MAX_NAME = 256
# A logged KV capacity describes one build: changing any of these makes it stale.
BUILD_FIELDS = (
    "model",
    "params",
    "layers",
    "kv_heads",
    "head_dim",
    "gpu",
    "gpu_memory_gib",
    "tensor_parallel",
    "pipeline_parallel",
    "weight_dtype",
    "kv_dtype",
    "memory_fraction",
    "framework",
    "max_num_tokens",
    "hf_model",
    "hf_config",
    "engine_version",
    "chunked_prefill",
    "gpus_per_node",
    "gpu_arch",
    "gpu_bandwidth_gbs",
    "gpu_bf16_tflops",
    "gpu_fp8_tflops",
    "gpu_fp4_tflops",
)
# What a pasted log states besides the KV capacity, and the profile field it fills.
LOG_FIELDS = (("weights_gib", "weights_gib_logged"), ("engine_version", "engine_version"))


class NoProfile(LookupError):
    """The engine has no stored profile, or the stored one is no longer valid."""


def check_name(engine: str) -> None:
    """Refuse an engine name a profile cannot be saved under (ValueError naming the rule).

    Names are those requests carry (often hostnames, so dots inside a name are fine): at most
    256 characters, no control characters, no '/', and not '.' or '..' (they would read as
    paths in the page's and the API's URLs)."""
    if not engine or not engine.strip():
        raise ValueError("engine name: empty; give the name the engine's requests carry")
    if len(engine) > MAX_NAME:
        raise ValueError(f"engine name: {len(engine):,} characters; at most {MAX_NAME}")
    if any(ord(c) < 32 or ord(c) == 127 for c in engine):
        raise ValueError("engine name: holds a control character (e.g. NUL or a newline)")
    if "/" in engine:
        # Ingest takes such names (a LiteLLM api_base without a scheme gives `host:8000/v1`),
        # but they would read as paths in the page's and the API's URLs.
        raise ValueError(
            f"engine name {engine[:MAX_NAME]!r} holds '/': a profile cannot be saved for it; "
            "rename the engine where its requests are sent (for LiteLLM, give api_base a "
            "scheme: http://host:port/v1)"
        )
    if engine in (".", ".."):
        raise ValueError(f"engine name: {engine!r} is not a name (dots inside a name are fine)")


# Engines whose failure was logged: each (engine, error) once, not once per page view.
_logged: set[tuple[str, str]] = set()
_logged_lock = threading.Lock()
# Failures that come from what a profile holds: its owner can fix them by editing it.
_PROFILE_ERRORS = (NoProfile, ArithmeticError, ValidationError, PerfModelError)


def profile_caused(exc: BaseException) -> bool:
    """Whether sizing failed because of the engine's profile: no (valid) profile, numbers
    the arithmetic cannot take, the performance model refusing it, or a TypeError/ValueError
    raised inside app/sizing (pure code whose only inputs are the profile and the traffic).
    Anything else (a database error, a bug elsewhere) is not the profile owner's to fix."""
    if isinstance(exc, _PROFILE_ERRORS):
        return True
    return isinstance(exc, (TypeError, ValueError)) and _raised_in_sizing(exc)


def _raised_in_sizing(exc: BaseException) -> bool:
    """Whether the traceback, from where it was caught down to the raise, runs through
    app/sizing."""
    tb = exc.__traceback__
    while tb is not None:
        if str(tb.tb_frame.f_globals.get("__name__", "")).startswith("app.sizing."):
            return True
        tb = tb.tb_next
    return False


def _first_time(key: tuple[str, str]) -> bool:
    with _logged_lock:
        if key in _logged:
            return False
        if len(_logged) > 1000:  # bounded: a churning fleet must not grow it forever
            _logged.clear()
        _logged.add(key)
        return True


def sizing_failure(engine: str, exc: BaseException) -> str:
    """What an engine's error row says when sizing it raised; logged once per engine and error.

    One engine's bad profile (or a failure of the performance model on it) must never break
    the page, the fleet table or the email for the others: callers show this instead. Only a
    failure the profile caused (profile_caused) says "fix its profile"; any other is said
    neutrally and logged with its traceback, once per engine and kind of error."""
    detail = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
    if not profile_caused(exc):
        if _first_time((engine, type(exc).__name__)):
            log.warning("engine %r could not be computed: %s", engine, detail, exc_info=exc)
        return f"{engine}: could not be computed ({detail[:300]}); see the server log"
    if isinstance(exc, NoProfile):
        # Already says which engine, which field and "save it again".
        detail = message = str(exc)
    else:
        message = (
            f"{engine}: could not be sized ({detail[:300]}); fix its profile on the "
            "Rightsizing page"
        )
    if _first_time((engine, detail)):  # once, not a traceback per page view
        log.warning("engine %r could not be sized: %s", engine, detail)
    return message


def problem(exc: ValidationError) -> str:
    """The first validation error as 'field: message'."""
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "profile"
    return f"{where}: {first['msg'].removeprefix('Value error, ')}"


def load_profile(db: Database, engine: str) -> EngineProfile:
    """The engine's stored profile; raises NoProfile naming the engine (and the bad field)."""
    stored = engines.get_profile(db.cursor(), engine)
    if stored is None:
        raise NoProfile(
            f"engine {engine!r} has no profile: create one with PUT /api/engines/{engine} "
            "or on the Rightsizing page"
        )
    try:
        return EngineProfile.model_validate(stored)
    except ValidationError as exc:
        raise NoProfile(
            f"engine {engine!r} has a stored profile that is no longer valid ({problem(exc)}); "
            "save it again"
        ) from None


def edited_profile(
    previous: dict[str, Any] | None, data: dict[str, Any], startup_log: str | None
) -> EngineProfile:
    """A profile from edited fields: a pasted log sets the measured capacity; a changed build
    drops a stale one. Raises ValueError naming the field."""
    if startup_log:
        measured = parse_startup_log(startup_log)
        if measured is None:
            raise ValueError(
                "startup_log: no KV cache size found; paste the line 'GPU KV cache size: N "
                "tokens' (vLLM) or '… max tokens in paged KV cache (N)' (TensorRT-LLM)"
            )
        facts = parse_log_facts(startup_log)
        data = {
            **data,
            "measured_kv_tokens": measured.kv_tokens,
            "measured_source": f"{measured.framework} startup log: {measured.line[:200]}",
            **{
                field: getattr(facts, fact)
                for fact, field in LOG_FIELDS
                if getattr(facts, fact) is not None and not data.get(field)
            },
        }
    elif previous and any(previous.get(f) != data.get(f) for f in BUILD_FIELDS):
        stale = ("measured_kv_tokens", "measured_source", "weights_gib_logged")
        data = {k: v for k, v in data.items() if k not in stale}
    try:
        return EngineProfile.model_validate(data)
    except ValidationError as exc:
        raise ValueError(problem(exc)) from None


def stored_profiles(db: Database) -> dict[str, dict[str, Any]]:
    """Every stored profile by engine name, as stored (valid or not)."""
    return engines.list_profiles(db.cursor())


def stored_build(stored: dict[str, Any]) -> tuple[str, str]:
    """A stored profile's model and GPUs ("4× H100") as words, whatever it holds (a profile
    stored before a bound existed may hold anything: this never raises)."""
    model = stored.get("model") or ""
    gpu = stored.get("gpu") or ""
    tp, pp = stored.get("tensor_parallel", 1), stored.get("pipeline_parallel", 1)
    if all(isinstance(n, int) and not isinstance(n, bool) and 0 < n < 10**6 for n in (tp, pp)):
        gpus = f"{tp * pp}× {gpu}"
    else:
        gpus = f"?× {gpu}"
    return str(model)[:200], str(gpus)[:200]


def stored_profile(db: Database, engine: str) -> dict[str, Any] | None:
    """An engine's stored profile as stored, or None."""
    return engines.get_profile(db.cursor(), engine)


def current_author() -> str:
    """Who is changing things, as history records it: the logged-in user's name, the token
    (its name as the auth gate gives it), "open mode", or "cli" outside a request (the
    `tokenshape` command)."""
    who = principal.current()
    if who is None:
        return "cli"
    if who.via == "open":
        return "open mode"
    return who.name


def token_author(gateway: str, token_id: str) -> str:
    """A bearer token as the author of a change: its gateway and id."""
    return f"token {gateway}/{token_id}"


def _value_words(value: Any) -> str:
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{int(value):,}" if value.is_integer() and abs(value) < 1e15 else repr(value)
    if isinstance(value, str) and len(value) <= 60 and "\n" not in value:
        return value
    return "…"


def change_words(before: dict[str, Any] | None, after: dict[str, Any] | None) -> str:
    """A profile change in words: "max_input_len 4,096 → 8,192; slo_ttft_ms set to 500"."""
    if before is None and after is None:
        return "no profile"
    if before is None:
        model, gpus = stored_build(after or {})
        return f"created: {model} on {gpus}"
    if after is None:
        model, gpus = stored_build(before)
        return f"deleted (was {model} on {gpus})"
    changes = []
    for key in sorted(set(before) | set(after)):
        old, new = before.get(key), after.get(key)
        if old == new:
            continue
        if key not in before:
            words = _value_words(new)
            changes.append(f"{key} set" if words == "…" else f"{key} set to {words}")
        elif key not in after:
            words = _value_words(old)
            changes.append(f"{key} removed" if words == "…" else f"{key} {words} removed")
        elif "…" in (_value_words(old), _value_words(new)):
            changes.append(f"{key} changed")  # a pasted config.json: too long to say
        else:
            changes.append(f"{key} {_value_words(old)} → {_value_words(new)}")
    if not changes:
        return "no change"
    shown = changes[:8]
    more = f"; and {len(changes) - len(shown)} more" if len(changes) > len(shown) else ""
    return "; ".join(shown)[:1000] + more


def save_profile(
    db: Database,
    engine: str,
    data: dict[str, Any],
    startup_log: str | None,
    now: datetime,
    *,
    merge: bool = False,
    author: str | None = None,
) -> EngineProfile:
    """Validate and store a profile (`merge`: fields left empty keep their stored value, as
    in the page's editor; else `data` replaces the profile, as PUT does). ValueError names
    the bad field, or the rule a bad engine name breaks (check_name). The change is recorded
    as a version (by `author`, else current_author()) in the same transaction."""
    check_name(engine)
    made: list[EngineProfile] = []

    def change(previous: dict[str, Any] | None) -> dict[str, Any]:
        # Inside the write's transaction: the merge and the stale-capacity rule see the
        # profile as stored at that moment, not as read before.
        fields = data
        if merge:
            fields = {**(previous or {}), **data}
            fields = {k: v for k, v in fields.items() if v not in (None, "")}
        made.append(edited_profile(previous, fields, startup_log))
        return made[-1].model_dump(mode="json", exclude_none=True)

    engines.change_profile(
        db.cursor(), engine, change, now, author or current_author(), change_words
    )
    return made[-1]


def delete_profile(
    db: Database, engine: str, now: datetime | None = None, author: str | None = None
) -> bool:
    """Delete an engine's profile (its requests stay), keeping it as the engine's last
    version so it can be restored; False when it had none. `now`: the injected clock's time
    (the wall clock when a caller has none)."""
    version = engines.change_profile(
        db.cursor(),
        engine,
        lambda _stored: None,
        now or datetime.now(UTC),
        author or current_author(),
        change_words,
    )
    return version is not None


PAST = {"create": "created", "edit": "edited", "delete": "deleted", "restore": "restored"}


class NoDeletedProfile(LookupError):
    """The engine has no deleted profile to restore."""


class RestoreConflict(ValueError):
    """The engine has a newer profile than the deleted one: restoring would replace it."""


def restore_profile(
    db: Database, engine: str, now: datetime, author: str | None = None
) -> engines.Version:
    """Store again the profile an engine's last change deleted; RestoreConflict (the engine has
    a profile again) or NoDeletedProfile, each saying what to do instead."""
    try:
        deleted = engines.last_version(db.cursor(), engine)
        when = (
            f"deleted {deleted.at.astimezone(UTC):%Y-%m-%d %H:%M} UTC by {deleted.author}"
            if deleted is not None and deleted.action == "delete"
            else "deleted"
        )
        return engines.restore_profile(
            db.cursor(), engine, now, author or current_author(), f"restored the profile {when}"
        )
    except engines.ProfileExists as exc:
        since = ""
        if exc.current is not None:
            done = PAST.get(exc.current.action, exc.current.action)
            since = (
                f" ({done} {exc.current.at.astimezone(UTC):%Y-%m-%d %H:%M} UTC "
                f"by {exc.current.author})"
            )
        raise RestoreConflict(
            f"engine {engine!r} has a newer profile{since}: restoring the deleted one would "
            "replace it; edit the current profile instead, or delete it first"
        ) from None
    except engines.NothingToRestore as exc:
        last = (
            f"its last change was {exc.last.action!r} ({exc.last.summary})"
            if exc.last is not None
            else "it has no recorded changes"
        )
        raise NoDeletedProfile(
            f"engine {engine!r} has no deleted profile to restore: {last}"
        ) from None


def history(db: Database, engine: str, limit: int = 100) -> list[engines.Version]:
    """An engine's recorded profile changes, newest first."""
    return engines.versions(db.cursor(), engine, limit)
