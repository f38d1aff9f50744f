"""The documents that apply a seasonal report's plan: KEDA, plain Kubernetes, Triton's config.

The plan applied is the one the verdict recommends: the two-window split when it pays (one
Deployment per window, each scaled to 0 outside its hours), else one engine scaled by the hour.
"""

from __future__ import annotations

from typing import Any

from app.services.rightsizing import SeasonalReport
from app.sizing.deploy import (
    hpa_and_cronjobs,
    k8s_name,
    keda_scaled_object,
    to_yaml,
    triton_parameters,
)
from app.sizing.profile import EngineProfile
from app.sizing.recommend import memory_for
from app.sizing.seasonal import window_label

DEFAULT_NAMESPACE = "llm"
# In-flight batching schedules every engine step; a queue delay would only add to TTFT.
TRITON_QUEUE_DELAY_US = 0


def deploy_documents(
    r: SeasonalReport,
    profile: EngineProfile,
    *,
    namespace: str = DEFAULT_NAMESPACE,
) -> dict[str, Any]:
    """KEDA ScaledObjects, HPA + CronJobs and (TensorRT-LLM) Triton parameters, as YAML/text."""
    res = r.result
    memory = memory_for(profile, profile.max_num_tokens)
    kv_capacity_tokens = memory.kv_capacity_tokens if memory.fits else None
    if res is None:
        return {"error": r.verdict}
    use_split = res.split is not None and res.savings_vs_hourly >= res.threshold
    units: list[tuple[str, list[int], int | None, Any]] = []
    if use_split and res.split is not None:
        for i, config in enumerate(res.split.configs):
            hours = set(config.hours)
            per_hour = [n if h in hours else 0 for h, n in enumerate(res.split.replicas)]
            units.append((k8s_name(r.engine, f"w{i + 1}"), per_hour, 0, config))
    else:
        units.append((k8s_name(r.engine), list(res.hourly.replicas), None, res.hourly.configs[0]))
    keda, kube, windows = [], [], []
    for name, per_hour, floor, config in units:
        keda.append(
            keda_scaled_object(
                name=name,
                deployment=name,
                namespace=namespace,
                tz=r.tz,
                replicas_per_hour=per_hour,
                min_replicas=floor,
            )
        )
        kube += hpa_and_cronjobs(
            name=name, deployment=name, namespace=namespace, tz=r.tz, replicas_per_hour=per_hour
        )
        window: dict[str, Any] = {
            "deployment": name,
            "hours": window_label(config.hours),
            "max_seq_len": config.max_seq_len,
            "replicas_per_hour": per_hour,
        }
        if profile.framework == "trtllm":
            window["triton_config_pbtxt"] = triton_parameters(
                max_batch_size=max(config.slots, 1),
                max_tokens_in_paged_kv_cache=kv_capacity_tokens,
                kv_cache_free_gpu_mem_fraction=profile.memory_fraction,
                max_queue_delay_microseconds=TRITON_QUEUE_DELAY_US,
            )
        windows.append(window)
    return {
        "plan": "seasonal" if use_split else "hourly",
        "namespace": namespace,
        "deployments": [u[0] for u in units],
        "windows": windows,
        "keda_yaml": to_yaml(keda),
        "kubernetes_yaml": to_yaml(kube),
        "notes": [
            f"Deployments named {', '.join(u[0] for u in units)} in namespace {namespace} are "
            "assumed: rename them to yours before applying",
            "a cron trigger's desiredReplicas is a floor that other triggers may raise; pods "
            "that load weights for minutes are ready after the hour starts (docs/guide/deploy.md)",
        ],
    }
