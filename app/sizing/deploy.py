"""Documents a team can apply: replica schedules as KEDA / Kubernetes objects, Triton parameters.

Pure: every function takes numbers and names and returns dicts or text (docs/guide/deploy.md).

- A schedule is 24 integers, the replicas for each local hour (0–23) in the time zone `tz`.
- Names are DNS-1123 labels (lowercase letters, digits and `-`, at most 63 characters, starting
  and ending with a letter or digit): `k8s_name` turns an engine name such as "Chat_8B.fp8" into
  "chat-8b-fp8"; a name that would be too long keeps its start and gets a hash of the whole, so
  two long names stay apart. CronJob names are kept to 52 characters, as Kubernetes requires (the
  Job controller appends 11). `namespace` and `deployment` name objects that already exist, so they
  are checked, never rewritten.
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

import yaml

HOURS = 24
KEDA_API = "keda.sh/v1alpha1"
# Pin the kubectl image to the cluster's minor version (kubectl supports one minor either side).
DEFAULT_KUBECTL_IMAGE = "registry.k8s.io/kubectl:v1.34.0"
LABEL_MAX = 63
CRONJOB_NAME_MAX = 52
_LABELS = {"app.kubernetes.io/created-by": "tokenshape"}
_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_SUBDOMAIN_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def k8s_name(base: str, suffix: str = "", max_len: int = LABEL_MAX) -> str:
    """`base` as a DNS-1123 label, then `suffix` (already valid), within `max_len` characters."""
    clean = re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-") or "engine"
    room = max_len - len(suffix)
    if len(clean) > room:
        digest = hashlib.sha1(base.encode()).hexdigest()[:8]
        clean = clean[: room - 9].rstrip("-") + "-" + digest
    return clean + suffix


def _check_label(value: str, what: str) -> None:
    if len(value) > LABEL_MAX or not _LABEL_RE.match(value):
        raise ValueError(f"{what} {value!r} is not a DNS-1123 label")


def _check_subdomain(value: str, what: str) -> None:
    if len(value) > 253 or not _SUBDOMAIN_RE.match(value):
        raise ValueError(f"{what} {value!r} is not a DNS-1123 subdomain")


def _check_tz(tz: str) -> None:
    # The IANA database is not read here (no I/O): KEDA and the CronJob controller check it.
    if not tz or any(c.isspace() for c in tz):
        raise ValueError(f"time zone {tz!r} is not an IANA name such as Europe/Berlin")


def _check_schedule(replicas_per_hour: list[int]) -> list[int]:
    if len(replicas_per_hour) != HOURS:
        raise ValueError(f"a schedule has {HOURS} hours, got {len(replicas_per_hour)}")
    out = [int(r) for r in replicas_per_hour]
    if any(r < 0 or r != v for r, v in zip(out, replicas_per_hour, strict=True)):
        raise ValueError("replicas per hour must be whole numbers ≥ 0")
    return out


def schedule_runs(replicas_per_hour: list[int]) -> list[tuple[int, int, int]]:
    """Consecutive hours with the same replicas as (start, end exclusive, replicas), by start.

    start is 0–23 and end 1–24; end ≤ start means the run wraps past midnight (22, 6, 2 is
    22:00–06:00). Hours 23 and 0 alike join one run. A schedule with every hour alike is
    [(0, 24, r)]. The runs' lengths add up to 24."""
    r = _check_schedule(replicas_per_hour)
    starts = [h for h in range(HOURS) if r[h] != r[h - 1]]  # r[-1] is hour 23
    if not starts:
        return [(0, HOURS, r[0])]
    runs = []
    for i, s in enumerate(starts):
        end = starts[i + 1] if i + 1 < len(starts) else (starts[0] or HOURS)
        runs.append((s, end, r[s]))
    return runs


def _cron(hour: int) -> str:
    return f"0 {hour % HOURS} * * *"


def _target(deployment: str) -> dict[str, str]:
    return {"apiVersion": "apps/v1", "kind": "Deployment", "name": deployment}


def keda_scaled_object(
    *,
    name: str,
    deployment: str,
    namespace: str,
    tz: str,
    replicas_per_hour: list[int],
    min_replicas: int | None = None,
    max_replicas: int | None = None,
) -> dict[str, Any]:
    """A KEDA ScaledObject whose cron triggers hold the Deployment at the schedule's replicas.

    minReplicaCount is the schedule's minimum unless `min_replicas` says otherwise (0 for a window
    engine that is off outside its window); every run above it gets a cron trigger (timezone,
    start, end, desiredReplicas). maxReplicaCount is the schedule's maximum, or `max_replicas`
    when that is higher (room for other triggers added by hand)."""
    _check_subdomain(deployment, "deployment")
    _check_label(namespace, "namespace")
    _check_tz(tz)
    runs = schedule_runs(replicas_per_hour)
    low, high = min(r for *_, r in runs), max(r for *_, r in runs)
    floor = low if min_replicas is None else min_replicas
    if floor < 0:
        raise ValueError("min_replicas must be ≥ 0")
    if max_replicas is not None and max_replicas < high:
        raise ValueError(f"max_replicas {max_replicas} is below the schedule's peak {high}")
    ceiling = max(high, floor, max_replicas or 0, 1)
    if len(runs) == 1:
        # A cron trigger's start and end must differ: a whole day is two halves.
        runs = [(0, 12, runs[0][2]), (12, HOURS, runs[0][2])]
    # KEDA needs at least one trigger, even when the floor already covers every hour.
    chosen = [run for run in runs if run[2] > floor] or runs
    triggers = [
        {
            "type": "cron",
            "name": f"cron-{s:02d}00-{e % HOURS:02d}00",
            "metadata": {
                "timezone": tz,
                "start": _cron(s),
                "end": _cron(e),
                "desiredReplicas": str(r),  # KEDA trigger metadata values are strings
            },
        }
        for s, e, r in chosen
    ]
    return {
        "apiVersion": KEDA_API,
        "kind": "ScaledObject",
        "metadata": {"name": k8s_name(name), "namespace": namespace, "labels": dict(_LABELS)},
        "spec": {
            "scaleTargetRef": _target(deployment),
            "minReplicaCount": floor,
            "maxReplicaCount": ceiling,
            "triggers": triggers,
        },
    }


def hpa_and_cronjobs(
    *,
    name: str,
    deployment: str,
    namespace: str,
    tz: str,
    replicas_per_hour: list[int],
    image: str = DEFAULT_KUBECTL_IMAGE,
    metrics: list[dict[str, Any]] | None = None,
) -> list[dict[str, Any]]:
    """The plain-Kubernetes schedule: ServiceAccount, Role, RoleBinding, an autoscaling/v2 HPA,
    and one batch/v1 CronJob (with timeZone) per change of replicas that patches the HPA.

    Without `metrics` the CronJobs set minReplicas and maxReplicas both to the hour's replicas,
    so the HPA holds the plan exactly (an HPA's default metric, CPU, says nothing about an LLM
    server's load). With `metrics` (e.g. a Pods metric from a metrics adapter) the HPA scales on
    them between the hour's replicas, set as minReplicas, and the schedule's peak. An HPA cannot
    go below one replica: hours planned at 0 run 1 (use KEDA for an engine that is off)."""
    _check_subdomain(deployment, "deployment")
    _check_label(namespace, "namespace")
    _check_tz(tz)
    runs = schedule_runs(replicas_per_hour)
    floors = [(s, e, max(1, r)) for s, e, r in runs]
    peak = max(r for *_, r in floors)
    hpa_name = k8s_name(name)
    pin = metrics is None
    hpa_spec: dict[str, Any] = {
        "scaleTargetRef": _target(deployment),
        # Until the first CronJob runs, hold the peak: never fewer replicas than the plan.
        "minReplicas": peak,
        "maxReplicas": peak,
    }
    if not pin:
        hpa_spec["metrics"] = metrics
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": hpa_name, "namespace": namespace, "labels": dict(_LABELS)},
        "spec": hpa_spec,
    }
    if len(floors) == 1:
        return [hpa]  # nothing changes over the day: no CronJob, no RBAC
    account = k8s_name(name, "-hpa-schedule")
    meta = {"namespace": namespace, "labels": dict(_LABELS)}
    docs: list[dict[str, Any]] = [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": account, **meta}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": account, **meta},
            # Least privilege: read and patch this one HPA, nothing else.
            "rules": [
                {
                    "apiGroups": ["autoscaling"],
                    "resources": ["horizontalpodautoscalers"],
                    "resourceNames": [hpa_name],
                    "verbs": ["get", "patch"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": account, **meta},
            "subjects": [{"kind": "ServiceAccount", "name": account, "namespace": namespace}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": account},
        },
        hpa,
    ]
    for s, _, r in floors:
        patch = {"minReplicas": r, "maxReplicas": r} if pin else {"minReplicas": r}
        docs.append(
            {
                "apiVersion": "batch/v1",
                "kind": "CronJob",
                "metadata": {"name": k8s_name(name, f"-{s:02d}00", CRONJOB_NAME_MAX), **meta},
                "spec": {
                    "schedule": _cron(s),
                    "timeZone": tz,
                    "concurrencyPolicy": "Forbid",
                    # A missed start (controller down) still runs within the hour.
                    "startingDeadlineSeconds": 3300,
                    "successfulJobsHistoryLimit": 1,
                    "failedJobsHistoryLimit": 3,
                    "jobTemplate": {
                        "spec": {
                            "backoffLimit": 3,
                            "template": {
                                "metadata": {"labels": dict(_LABELS)},
                                "spec": {
                                    "serviceAccountName": account,
                                    "restartPolicy": "OnFailure",
                                    "containers": [
                                        {
                                            "name": "patch-hpa",
                                            "image": image,
                                            "command": [
                                                "kubectl",
                                                "patch",
                                                "horizontalpodautoscaler",
                                                hpa_name,
                                                "--namespace",
                                                namespace,
                                                "--type",
                                                "merge",
                                                "--patch",
                                                json.dumps({"spec": patch}, separators=(",", ":")),
                                            ],
                                        }
                                    ],
                                },
                            },
                        }
                    },
                },
            }
        )
    return docs


def triton_parameters(
    *,
    max_batch_size: int,
    max_tokens_in_paged_kv_cache: int | None,
    kv_cache_free_gpu_mem_fraction: float,
    max_queue_delay_microseconds: int,
) -> str:
    """config.pbtxt lines for Triton's `tensorrt_llm` model (TensorRT-LLM backend), each with
    a comment saying what it is for; they replace the template's placeholders of the same name."""
    if max_batch_size < 1:
        raise ValueError("max_batch_size must be ≥ 1")
    if max_tokens_in_paged_kv_cache is not None and max_tokens_in_paged_kv_cache < 1:
        raise ValueError("max_tokens_in_paged_kv_cache must be ≥ 1 or None")
    if not 0 < kv_cache_free_gpu_mem_fraction <= 1:
        raise ValueError("kv_cache_free_gpu_mem_fraction must be in (0, 1]")
    if max_queue_delay_microseconds < 0:
        raise ValueError("max_queue_delay_microseconds must be ≥ 0")

    def parameter(key: str, value: str) -> list[str]:
        return [
            "parameters: {",
            f'  key: "{key}"',
            "  value: {",
            f'    string_value: "{value}"',
            "  }",
            "}",
        ]

    lines = [
        "# tokenshape: bounds for the tensorrt_llm model of the inflight_batcher_llm repository.",
        "# Requests batched together; keep it at or below trtllm-build --max_batch_size.",
        f"max_batch_size: {max_batch_size}",
        "",
        "dynamic_batching {",
        "  # Same as max_batch_size (as in the template): a preferred size above it is an error.",
        f"  preferred_batch_size: [ {max_batch_size} ]",
        "  # How long a request may wait in Triton's queue to join a batch (it adds to TTFT).",
        f"  max_queue_delay_microseconds: {max_queue_delay_microseconds}",
        "}",
        "",
    ]
    if max_tokens_in_paged_kv_cache is not None:
        lines.append(
            "# KV cache cap in tokens; with the fraction below, the smaller of the two applies."
        )
        lines += parameter("max_tokens_in_paged_kv_cache", str(max_tokens_in_paged_kv_cache))
    lines.append(
        "# Share of the GPU memory left free after the weights load given to the KV cache."
    )
    lines += parameter("kv_cache_free_gpu_mem_fraction", f"{kv_cache_free_gpu_mem_fraction:g}")
    return "\n".join(lines) + "\n"


def to_yaml(docs: list[dict[str, Any]]) -> str:
    """The documents as one multi-document YAML stream (`kubectl apply -f -` takes it)."""
    return yaml.safe_dump_all(
        docs, explicit_start=True, sort_keys=False, default_flow_style=False, width=1000
    )
