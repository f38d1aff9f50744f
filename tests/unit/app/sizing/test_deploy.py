"""Applicable documents (app/sizing/deploy): schedules, KEDA ScaledObject, HPA + CronJobs, Triton.

The Kubernetes documents are validated, without a cluster, against vendored schemas
(tests/data/k8s/, each file's header names its source, version and licence): the KEDA 2.16.1
ScaledObject CRD's openAPIV3Schema, and the Kubernetes v1.30.0 strict JSON schemas. The Triton
fragment is parsed by google.protobuf's text_format into a message type built here with the
names and types of Triton's model_config.proto (no Triton proto package is installed).
"""

from __future__ import annotations

import copy
import json
import random
import re
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema_rs
import pytest
import yaml
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory, text_format

from app.sizing.deploy import (
    CRONJOB_NAME_MAX,
    hpa_and_cronjobs,
    k8s_name,
    keda_scaled_object,
    schedule_runs,
    to_yaml,
    triton_parameters,
)

DATA = Path(__file__).parents[3] / "data" / "k8s"
TZ = "Europe/Berlin"
# Office hours at 5, evening at 3, night at 2 (22:00-06:00 wraps midnight).
DAY = [2] * 6 + [3] * 2 + [5] * 10 + [3] * 4 + [2] * 2
WINDOW = [0] * 20 + [4] * 4  # a batch engine on only 20:00-24:00
LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
Loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# --- schemas ---------------------------------------------------------------------------------


def _strict(schema: Any) -> Any:
    """The CRD schema as the API server's strict field validation (kubectl's default since
    1.27) applies it: an object with listed properties rejects fields it does not list."""
    if isinstance(schema, dict):
        out = {k: _strict(v) for k, v in schema.items()}
        if "properties" in out and "additionalProperties" not in out:
            out["additionalProperties"] = False
        return out
    if isinstance(schema, list):
        return [_strict(v) for v in schema]
    return schema


@cache
def _keda_validator() -> jsonschema_rs.Validator:
    crd = yaml.load((DATA / "keda-scaledobjects-v2.16.1.yaml").read_text(), Loader=Loader)
    (version,) = [v for v in crd["spec"]["versions"] if v["name"] == "v1alpha1"]
    return jsonschema_rs.Draft4Validator(_strict(version["schema"]["openAPIV3Schema"]))


@cache
def _k8s_validators() -> dict[str, jsonschema_rs.Validator]:
    bundle = yaml.load((DATA / "kubernetes-v1.30.0-strict.yaml").read_text(), Loader=Loader)
    defs = bundle["definitions"]
    registry = jsonschema_rs.Registry([(defs["$id"], defs)])
    return {
        kind: jsonschema_rs.validator_for(schema, registry=registry)
        for kind, schema in bundle["kinds"].items()
    }


def _errors(doc: dict[str, Any]) -> list[str]:
    if doc["apiVersion"] == "keda.sh/v1alpha1":
        validator = _keda_validator()
    else:
        validator = _k8s_validators()[doc["kind"]]
    return [
        f"{'/'.join(map(str, e.instance_path))}: {e.message}" for e in validator.iter_errors(doc)
    ]


def _keda(schedule: list[int] = DAY, **kw: Any) -> dict[str, Any]:
    args = {"name": "chat-8b", "deployment": "vllm-chat", "namespace": "llm", "tz": TZ}
    return keda_scaled_object(**{**args, "replicas_per_hour": schedule, **kw})


def _plain(schedule: list[int] = DAY, **kw: Any) -> list[dict[str, Any]]:
    args = {"name": "chat-8b", "deployment": "vllm-chat", "namespace": "llm", "tz": TZ}
    return hpa_and_cronjobs(**{**args, "replicas_per_hour": schedule, **kw})


def _hour(cron: str) -> int:
    minute, hour, *rest = cron.split()
    assert minute == "0" and rest == ["*", "*", "*"]
    return int(hour)


def _within(h: int, start: int, end: int) -> bool:
    """Hour h in [start, end) on a 24-hour clock, wrapping when end ≤ start."""
    return start <= h < end if start < end else h >= start or h < end


# --- schedule_runs ---------------------------------------------------------------------------


def test_runs_join_hours_alike_and_wrap_past_midnight():
    assert schedule_runs(DAY) == [(6, 8, 3), (8, 18, 5), (18, 22, 3), (22, 6, 2)]
    assert schedule_runs([4] * 24) == [(0, 24, 4)]
    assert schedule_runs(WINDOW) == [(0, 20, 0), (20, 24, 4)]


def test_runs_cover_the_day_exactly_on_random_schedules():
    rng = random.Random(21)
    for _ in range(300):
        schedule = [rng.choice([1, 1, 2, 3]) for _ in range(24)]
        runs = schedule_runs(schedule)
        assert sum((e - s) % 24 or 24 for s, e, _ in runs) == 24
        assert [s for s, _, _ in runs] == sorted(s for s, _, _ in runs)
        for h in range(24):
            (r,) = [r for s, e, r in runs if _within(h, s, e)]
            assert r == schedule[h]
        # Neighbouring runs differ, the wrap included: nothing left to join.
        assert all(runs[i][2] != runs[i - 1][2] for i in range(len(runs))) or len(runs) == 1


@pytest.mark.parametrize("bad", [[1] * 23, [1] * 25, [1] * 23 + [-1], [1.5] * 24])
def test_runs_reject_what_is_not_a_schedule(bad):
    with pytest.raises(ValueError):
        schedule_runs(bad)


# --- names -----------------------------------------------------------------------------------


def test_engine_names_become_dns_1123_labels():
    assert k8s_name("Chat_8B.fp8") == "chat-8b-fp8"
    assert k8s_name("--Llama 3.1 / 70B--") == "llama-3-1-70b"
    assert k8s_name("___") == "engine"
    long_a, long_b = "x" * 80 + "a", "x" * 80 + "b"
    a, b = k8s_name(long_a), k8s_name(long_b)
    assert len(a) <= 63 and len(b) <= 63 and a != b and LABEL.match(a) and LABEL.match(b)
    c = k8s_name(long_a, "-0600", CRONJOB_NAME_MAX)
    assert len(c) <= 52 and c.endswith("-0600") and LABEL.match(c)


def test_existing_object_names_are_checked_not_rewritten():
    with pytest.raises(ValueError, match="namespace"):
        _keda(namespace="LLM_prod")
    with pytest.raises(ValueError, match="deployment"):
        _plain(deployment="vLLM chat")
    with pytest.raises(ValueError, match="time zone"):
        _keda(tz="")


# --- KEDA ------------------------------------------------------------------------------------


@pytest.mark.parametrize("schedule", [DAY, WINDOW, [3] * 24])
def test_the_scaled_object_is_valid_against_the_keda_crd(schedule):
    doc = _keda(schedule)
    assert _errors(doc) == []
    assert doc["apiVersion"] == "keda.sh/v1alpha1" and doc["kind"] == "ScaledObject"
    assert LABEL.match(doc["metadata"]["name"])


def test_cron_triggers_hold_each_hour_at_its_planned_replicas():
    """KEDA's semantics by hand: a cron trigger is active from start to end (an end before the
    start means the next day), and the replicas are the most any active trigger asks, at least
    minReplicaCount."""
    for schedule, kw in [(DAY, {}), (WINDOW, {}), ([3] * 24, {}), (DAY, {"min_replicas": 0})]:
        spec = _keda(schedule, **kw)["spec"]
        for t in spec["triggers"]:
            assert t["type"] == "cron"
            assert set(t["metadata"]) == {"timezone", "start", "end", "desiredReplicas"}
            assert t["metadata"]["timezone"] == TZ
            assert t["metadata"]["start"] != t["metadata"]["end"]  # KEDA rejects equal ones
        assert len({t["name"] for t in spec["triggers"]}) == len(spec["triggers"])
        for h in range(24):
            active = [
                int(t["metadata"]["desiredReplicas"])
                for t in spec["triggers"]
                if _within(h, _hour(t["metadata"]["start"]), _hour(t["metadata"]["end"]))
            ]
            assert max([spec["minReplicaCount"], *active]) == schedule[h], (schedule, h)
        assert spec["maxReplicaCount"] >= max(schedule)


def test_the_floor_is_the_schedules_minimum_and_a_window_engine_may_be_off():
    day = _keda(DAY)["spec"]
    assert day["minReplicaCount"] == 2 and day["maxReplicaCount"] == 5
    assert len(day["triggers"]) == 3  # 22:00-06:00 is the floor itself: no trigger
    window = _keda(WINDOW)["spec"]
    assert window["minReplicaCount"] == 0
    assert [t["metadata"] for t in window["triggers"]] == [
        {"timezone": TZ, "start": "0 20 * * *", "end": "0 0 * * *", "desiredReplicas": "4"}
    ]
    assert _keda(DAY, max_replicas=8)["spec"]["maxReplicaCount"] == 8
    with pytest.raises(ValueError, match="peak"):
        _keda(DAY, max_replicas=4)
    flat = _keda([3] * 24)["spec"]  # a whole day is two halves: start and end must differ
    halves = [
        (_hour(t["metadata"]["start"]), _hour(t["metadata"]["end"])) for t in flat["triggers"]
    ]
    assert halves == [(0, 12), (12, 0)]


def test_a_broken_scaled_object_fails_the_crd():
    """The validator is real: wrong types and unknown fields are caught."""
    good = _keda()
    as_int = copy.deepcopy(good)
    as_int["spec"]["triggers"][0]["metadata"]["desiredReplicas"] = 3  # must be a string
    as_str = copy.deepcopy(good)
    as_str["spec"]["minReplicaCount"] = "2"
    unknown = copy.deepcopy(good)
    unknown["spec"]["minReplicas"] = 2  # the HPA's spelling, not KEDA's
    no_target = copy.deepcopy(good)
    del no_target["spec"]["scaleTargetRef"]
    for broken in (as_int, as_str, unknown, no_target):
        assert _errors(broken), broken


# --- HPA and CronJobs ------------------------------------------------------------------------


def test_every_plain_kubernetes_document_is_valid_against_its_schema():
    for schedule, kw in [(DAY, {}), (WINDOW, {}), (DAY, {"metrics": [_pods_metric()]})]:
        docs = _plain(schedule, **kw)
        for doc in docs:
            assert _errors(doc) == [], doc["kind"]
            assert LABEL.match(doc["metadata"]["name"])
            assert doc["metadata"]["namespace"] == "llm"
    kinds = [d["kind"] for d in _plain()]
    assert kinds == ["ServiceAccount", "Role", "RoleBinding", "HorizontalPodAutoscaler"] + [
        "CronJob"
    ] * len(schedule_runs(DAY))


def _pods_metric() -> dict[str, Any]:
    return {
        "type": "Pods",
        "pods": {
            "metric": {"name": "vllm_num_requests_running"},
            "target": {"type": "AverageValue", "averageValue": "24"},
        },
    }


def _patch(cronjob: dict[str, Any]) -> dict[str, Any]:
    (container,) = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"]
    command = container["command"]
    assert command[:4] == ["kubectl", "patch", "horizontalpodautoscaler", "chat-8b"]
    assert command[4:8] == ["--namespace", "llm", "--type", "merge"]
    return json.loads(command[command.index("--patch") + 1])["spec"]


def test_the_cronjobs_set_each_hour_to_its_planned_replicas():
    for schedule in (DAY, WINDOW):
        docs = _plain(schedule)
        jobs = [d for d in docs if d["kind"] == "CronJob"]
        starts = {_hour(j["spec"]["schedule"]): _patch(j) for j in jobs}
        assert all(j["spec"]["timeZone"] == TZ for j in jobs)
        assert all(len(j["metadata"]["name"]) <= CRONJOB_NAME_MAX for j in jobs)
        for h in range(24):
            # The last CronJob to run at or before hour h, wrapping to yesterday's.
            last = max((s for s in starts if s <= h), default=max(starts))
            want = max(1, schedule[h])  # an HPA holds at least one replica
            assert starts[last] == {"minReplicas": want, "maxReplicas": want}, (h, schedule)
        (hpa,) = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
        assert hpa["spec"]["minReplicas"] == hpa["spec"]["maxReplicas"] == max(schedule)
        assert "metrics" not in hpa["spec"]


def test_with_metrics_the_cronjobs_move_only_the_floor():
    docs = _plain(DAY, metrics=[_pods_metric()])
    (hpa,) = [d for d in docs if d["kind"] == "HorizontalPodAutoscaler"]
    assert hpa["spec"]["maxReplicas"] == 5 and hpa["spec"]["metrics"] == [_pods_metric()]
    patches = [_patch(d) for d in docs if d["kind"] == "CronJob"]
    assert patches == [{"minReplicas": r} for *_, r in schedule_runs(DAY)]


def test_the_rbac_grants_only_get_and_patch_on_this_one_hpa():
    docs = {d["kind"]: d for d in _plain()}
    (rule,) = docs["Role"]["rules"]
    assert rule == {
        "apiGroups": ["autoscaling"],
        "resources": ["horizontalpodautoscalers"],
        "resourceNames": [docs["HorizontalPodAutoscaler"]["metadata"]["name"]],
        "verbs": ["get", "patch"],
    }
    account = docs["ServiceAccount"]["metadata"]["name"]
    binding = docs["RoleBinding"]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "Role",
        "name": docs["Role"]["metadata"]["name"],
    }
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": account, "namespace": "llm"}]
    for job in [d for d in _plain() if d["kind"] == "CronJob"]:
        assert job["spec"]["jobTemplate"]["spec"]["template"]["spec"]["serviceAccountName"] == (
            account
        )


def test_a_flat_schedule_needs_no_cronjob():
    assert [d["kind"] for d in _plain([3] * 24)] == ["HorizontalPodAutoscaler"]


def test_broken_plain_documents_fail_their_schemas():
    docs = _plain()
    hpa = copy.deepcopy(next(d for d in docs if d["kind"] == "HorizontalPodAutoscaler"))
    hpa["spec"]["minReplicas"] = "2"
    job = copy.deepcopy(next(d for d in docs if d["kind"] == "CronJob"))
    job["spec"]["timeZone"] = 1
    typo = copy.deepcopy(next(d for d in docs if d["kind"] == "CronJob"))
    typo["spec"]["timezone"] = TZ  # KEDA's spelling, not the CronJob's
    role = copy.deepcopy(next(d for d in docs if d["kind"] == "Role"))
    role["rules"][0]["verbs"] = "patch"
    binding = copy.deepcopy(next(d for d in docs if d["kind"] == "RoleBinding"))
    del binding["roleRef"]
    for broken in (hpa, job, typo, role, binding):
        assert _errors(broken), broken["kind"]


# --- YAML ------------------------------------------------------------------------------------


def test_yaml_is_one_stream_that_reads_back_the_same():
    docs = [_keda(), *_plain()]
    text = to_yaml(docs)
    assert text.startswith("---\n") and text.count("\n---\n") == len(docs) - 1
    assert list(yaml.safe_load_all(text)) == docs  # desiredReplicas stays a string


# --- Triton ----------------------------------------------------------------------------------


@cache
def _model_config() -> Any:
    """ModelConfig with the fields the fragment sets, named and typed as in Triton's
    model_config.proto (package inference)."""
    f = descriptor_pb2.FieldDescriptorProto
    fd = descriptor_pb2.FileDescriptorProto(name="tokenshape_model_config.proto", package="t")
    param = fd.message_type.add(name="ModelParameter")
    param.field.add(name="string_value", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    batching = fd.message_type.add(name="ModelDynamicBatching")
    batching.field.add(
        name="preferred_batch_size", number=1, type=f.TYPE_INT32, label=f.LABEL_REPEATED
    )
    batching.field.add(
        name="max_queue_delay_microseconds", number=2, type=f.TYPE_UINT64, label=f.LABEL_OPTIONAL
    )
    config = fd.message_type.add(name="ModelConfig")
    config.field.add(name="name", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    config.field.add(name="max_batch_size", number=4, type=f.TYPE_INT32, label=f.LABEL_OPTIONAL)
    config.field.add(
        name="dynamic_batching",
        number=11,
        type=f.TYPE_MESSAGE,
        label=f.LABEL_OPTIONAL,
        type_name=".t.ModelDynamicBatching",
    )
    entry = config.nested_type.add(name="ParametersEntry")
    entry.options.map_entry = True
    entry.field.add(name="key", number=1, type=f.TYPE_STRING, label=f.LABEL_OPTIONAL)
    entry.field.add(
        name="value",
        number=2,
        type=f.TYPE_MESSAGE,
        label=f.LABEL_OPTIONAL,
        type_name=".t.ModelParameter",
    )
    config.field.add(
        name="parameters",
        number=14,
        type=f.TYPE_MESSAGE,
        label=f.LABEL_REPEATED,
        type_name=".t.ModelConfig.ParametersEntry",
    )
    pool = descriptor_pool.DescriptorPool()
    pool.Add(fd)
    return message_factory.GetMessageClass(pool.FindMessageTypeByName("t.ModelConfig"))


def test_the_triton_fragment_parses_as_model_config_text():
    text = triton_parameters(
        max_batch_size=64,
        max_tokens_in_paged_kv_cache=245_760,
        kv_cache_free_gpu_mem_fraction=0.9,
        max_queue_delay_microseconds=100,
    )
    config = text_format.Parse(text, _model_config()())
    assert config.max_batch_size == 64
    assert list(config.dynamic_batching.preferred_batch_size) == [64]
    assert config.dynamic_batching.max_queue_delay_microseconds == 100
    assert {k: v.string_value for k, v in config.parameters.items()} == {
        "max_tokens_in_paged_kv_cache": "245760",
        "kv_cache_free_gpu_mem_fraction": "0.9",
    }
    # Every setting has a comment line above it saying what it is for.
    lines = text.splitlines()
    for key in ("max_batch_size:", "max_queue_delay_microseconds:", 'key: "kv_cache_free'):
        i = next(i for i, line in enumerate(lines) if line.strip().startswith(key))
        above = lines[i - 1] if not key.startswith("key") else lines[i - 2]
        assert above.strip().startswith("#"), key


def test_without_a_token_cap_only_the_fraction_sizes_the_cache():
    text = triton_parameters(
        max_batch_size=8,
        max_tokens_in_paged_kv_cache=None,
        kv_cache_free_gpu_mem_fraction=0.85,
        max_queue_delay_microseconds=0,
    )
    config = text_format.Parse(text, _model_config()())
    assert dict(config.parameters.items()).keys() == {"kv_cache_free_gpu_mem_fraction"}
    assert "max_tokens_in_paged_kv_cache" not in text


def test_the_parser_is_real_a_misspelt_field_fails():
    text = triton_parameters(
        max_batch_size=8,
        max_tokens_in_paged_kv_cache=None,
        kv_cache_free_gpu_mem_fraction=0.85,
        max_queue_delay_microseconds=0,
    )
    with pytest.raises(text_format.ParseError):
        text_format.Parse(text.replace("max_batch_size:", "max_batch_sizes:"), _model_config()())
    with pytest.raises(ValueError):
        triton_parameters(
            max_batch_size=8,
            max_tokens_in_paged_kv_cache=None,
            kv_cache_free_gpu_mem_fraction=1.5,
            max_queue_delay_microseconds=0,
        )
