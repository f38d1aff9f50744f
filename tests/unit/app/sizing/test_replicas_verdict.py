"""The recommendation's sentence in replicas (app/sizing/rightsize.replicas_verdict)."""

from __future__ import annotations

from app.sizing.recommend import Bounds
from app.sizing.rightsize import Replicas, replicas_verdict

REC = Bounds(6144, 6400)
SLO = "TTFT p95 ≤ 800 ms, ITL p95 ≤ 200 ms"


def r(**kw) -> Replicas:
    base = dict(
        running=None,
        today=5,
        after=2,
        why_today="the KV cache",
        why_after="the latency targets",
        latency=2,
        slo=SLO,
        cost_per_gpu_hour=2.0,
    )
    return Replicas(**(base | kw))


def test_a_rebuild_that_saves_replicas_says_how_many_and_what_it_saves():
    words = replicas_verdict(r(), REC)
    # 3 replicas × 1 GPU × 730.5 h × $2.
    assert words == (
        f"Rebuilding to max_seq_len 6,400 serves the same traffic within the SLO ({SLO}) on "
        "2 replicas instead of 5 (saves $4,383 a month)."
    )


def test_too_few_replicas_today_say_so():
    words = replicas_verdict(r(running=1, today=3, after=3), REC)
    assert words.startswith("Today's 1 replica is too few for the busiest hour within the SLO")
    assert "it needs 3" in words


def test_a_build_that_holds_no_full_request_is_not_priced_at_zero():
    words = replicas_verdict(r(today=0), REC)
    assert words.startswith("Today's build cannot hold one full-length request")
    assert "saves" not in words and "on 2 replicas" in words


def test_without_the_model_no_slo_is_claimed():
    words = replicas_verdict(r(slo=None, note="the performance model cannot size this engine"), REC)
    assert "within the SLO" not in words and "the latency model is unavailable" in words
    assert "no SLO set" in replicas_verdict(r(slo=None), REC)


def test_an_slo_no_count_meets_says_the_replicas_are_memorys():
    words = replicas_verdict(r(feasible=False, note="even one request at a time ..."), REC)
    assert words.startswith("No replica count meets the SLO") and "memory's need alone" in words
