"""The GPU catalog: memory as CUDA reports it, bandwidth, dense tensor FLOPS and FP8/FP4 support.

`memory_gib` is the total `torch.cuda.mem_get_info` (and so vLLM's "total_gpu_memory" / "Free
memory on device (x/TOTAL GiB)") reports on Linux: a little under the marketed size, and under
`nvidia-smi`'s MiB figure (the driver keeps ~0.46 GiB on Hopper HBM3, ~0.7 GiB on Blackwell
HBM3e, ~0.35-0.5 GiB on GDDR cards). Where a startup log or a torch device dump with the total
was found it is quoted in `memory_source`; where not, the figure is `nvidia-smi`'s total less
that reserve, and `memory_source` says "derived". Windows and WSL report the full `nvidia-smi`
size (an RTX 5090 shows 31.84 GiB there, 31.37 GiB on Linux); override `gpu_memory_gib` then.

FLOPS are dense (no 2:4 sparsity); for GeForce cards they are the FP32-accumulate rates (what
inference kernels use; FP16-accumulate is twice that). `aic_system` names the aiconfigurator
system with measured kernel data for exactly this card; `reference_system` the covered system of
the same generation that a roofline estimate is scaled from (None for AMD: nothing to scale
from). `aic_roofline_system` names an aiconfigurator spec file without measured data, when one
exists for the card.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

ARCHES = ("ampere", "ada", "hopper", "blackwell", "cdna3")
FP8_ARCHES = frozenset({"ada", "hopper", "blackwell", "cdna3"})
FP4_ARCHES = frozenset({"blackwell"})
# A covered same-generation aiconfigurator system to scale a roofline estimate from.
REFERENCE_BY_ARCH: dict[str, str | None] = {
    "ampere": "a100_sxm",
    "ada": "l40s",
    "hopper": "h100_sxm",
    "blackwell": "b200_sxm",
    "cdna3": None,
}


@dataclass(frozen=True)
class GpuSpec:
    """A GPU as CUDA reports it: memory is what `torch.cuda.mem_get_info` calls total."""

    name: str
    memory_gib: float
    arch: str  # ampere, ada, hopper, blackwell, cdna3
    fp8: bool
    fp4: bool
    vendor: str = "nvidia"  # nvidia, amd
    bandwidth_gbs: float = 0.0  # memory bandwidth, GB/s
    bf16_tflops: float = 0.0  # dense, no sparsity
    fp8_tflops: float = 0.0  # dense; 0 when the card has no FP8 tensor cores
    fp4_tflops: float = 0.0  # dense; 0 when the card has no FP4 tensor cores
    form: str = "sxm"  # sxm, pcie, consumer, workstation, oam, superchip
    aic_system: str | None = None  # aiconfigurator system with measured data for this card
    reference_system: str | None = None  # same-generation system to scale a roofline from
    source: str = ""  # spec sheet
    memory_source: str = ""  # where memory_gib comes from
    aic_roofline_system: str | None = None  # aiconfigurator spec file without measured data
    label: str = ""  # the marketed name
    memory_gb: float = 0.0  # the marketed size, GB

    @property
    def measured_kernels(self) -> bool:
        """True when aiconfigurator has measured kernel data for this very card."""
        return self.aic_system is not None

    @property
    def memory_bytes(self) -> float:
        """The CUDA-reported total, in bytes."""
        return self.memory_gib * 1024**3


_NV = "https://www.nvidia.com/en-us/data-center/"
_AMPERE_WP = (
    "https://www.nvidia.com/content/PDF/nvidia-ampere-ga-102-gpu-architecture-whitepaper-v2.pdf"
)
_ADA_WP = "https://images.nvidia.com/aem-dam/Solutions/geforce/ada/nvidia-ada-gpu-architecture.pdf"
_BW_WP = (
    "https://images.nvidia.com/aem-dam/Solutions/geforce/blackwell/"
    "nvidia-rtx-blackwell-gpu-architecture.pdf"
)
_DERIVED_HOPPER = "derived: nvidia-smi {mib:,} MiB less the 0.46 GiB the driver keeps on Hopper"
_DERIVED_BW = "derived: nvidia-smi {mib:,} MiB less the 0.71 GiB the driver keeps on Blackwell"


def _derived(mib: int, reserve_gib: float) -> float:
    return round(mib / 1024 - reserve_gib, 2)


# Ordered as the UI lists them: data-center cards by generation, then workstation and consumer.
_ALL: tuple[GpuSpec, ...] = (
    GpuSpec(
        "A10G",
        22.07,
        "ampere",
        False,
        False,
        bandwidth_gbs=600,
        bf16_tflops=70,
        form="pcie",
        reference_system="a100_sxm",
        source="https://www.baseten.co/blog/nvidia-a10-vs-a10g-for-ml-model-inference/",
        memory_source="vLLM: total_gpu_memory (22.07GiB) on the 23,028 MiB A10-class board",
        label="NVIDIA A10G (AWS G5)",
        memory_gb=24,
    ),
    GpuSpec(
        "A10",
        22.07,
        "ampere",
        False,
        False,
        bandwidth_gbs=600,
        bf16_tflops=125,
        form="pcie",
        reference_system="a100_sxm",
        source=_NV + "products/a10-gpu/",
        memory_source="vLLM log, 1x A10 (Oracle OCI AI Quick Actions troubleshooting guide)",
        label="NVIDIA A10",
        memory_gb=24,
    ),
    GpuSpec(
        "A40",
        44.35,
        "ampere",
        False,
        False,
        bandwidth_gbs=696,
        bf16_tflops=149.7,
        form="pcie",
        reference_system="a100_sxm",
        source=_NV + "a40/",
        memory_source="torch: _CudaDeviceProperties(name='NVIDIA A40', total_memory=45416MB)",
        label="NVIDIA A40",
        memory_gb=48,
    ),
    GpuSpec(
        "A100-40GB",
        39.39,
        "ampere",
        False,
        False,
        bandwidth_gbs=1555,
        bf16_tflops=312,
        form="sxm",
        reference_system="a100_sxm",
        source=_NV + "a100/",
        memory_source="vLLM: 40,960 MiB SXM4 board reports 39.39 GiB",
        label="NVIDIA A100 40GB SXM",
        memory_gb=40,
    ),
    GpuSpec(
        "A100-80GB",
        79.15,
        "ampere",
        False,
        False,
        bandwidth_gbs=2039,
        bf16_tflops=312,
        form="sxm",
        aic_system="a100_sxm",
        reference_system="a100_sxm",
        source=_NV + "a100/",
        memory_source="vLLM: 81,920 MiB SXM4 board reports 79.15 GiB",
        label="NVIDIA A100 80GB SXM",
        memory_gb=80,
    ),
    GpuSpec(
        "A100-PCIe-80GB",
        79.15,
        "ampere",
        False,
        False,
        bandwidth_gbs=1935,
        bf16_tflops=312,
        form="pcie",
        reference_system="a100_sxm",
        source=_NV + "a100/",
        memory_source="as the SXM board: the same 81,920 MiB of HBM2e",
        aic_roofline_system="a100_pcie",
        label="NVIDIA A100 80GB PCIe",
        memory_gb=80,
    ),
    GpuSpec(
        "L4",
        22.05,
        "ada",
        True,
        False,
        bandwidth_gbs=300,
        bf16_tflops=121,
        fp8_tflops=242,
        form="pcie",
        reference_system="l40s",
        source=_NV + "l4/",
        memory_source="vLLM: Free memory on device (19.77/22.05 GiB), pytorch/pytorch#175666",
        aic_roofline_system="l4",
        label="NVIDIA L4",
        memory_gb=24,
    ),
    GpuSpec(
        "L40",
        44.39,
        "ada",
        True,
        False,
        bandwidth_gbs=864,
        bf16_tflops=181,
        fp8_tflops=362,
        form="pcie",
        reference_system="l40s",
        source=_NV + "l40/",
        memory_source="vLLM: total_gpu_memory (44.39GiB) on the 46,068 MiB Ada board",
        label="NVIDIA L40",
        memory_gb=48,
    ),
    GpuSpec(
        "L40S",
        44.42,
        "ada",
        True,
        False,
        bandwidth_gbs=864,
        bf16_tflops=362,
        fp8_tflops=733,
        form="pcie",
        aic_system="l40s",
        reference_system="l40s",
        source=_NV + "l40s/",
        memory_source="vLLM log, 2x L40S (vllm-project/vllm#15815)",
        label="NVIDIA L40S",
        memory_gb=48,
    ),
    GpuSpec(
        "H100",
        79.19,
        "hopper",
        True,
        False,
        bandwidth_gbs=3350,
        bf16_tflops=989,
        fp8_tflops=1979,
        form="sxm",
        aic_system="h100_sxm",
        reference_system="h100_sxm",
        source=_NV + "h100/",
        memory_source="vLLM 0.19.0 log (llm-d-planner accuracy sweep): 79.19 GiB",
        label="NVIDIA H100 80GB SXM",
        memory_gb=80,
    ),
    GpuSpec(
        "H100-PCIe",
        79.11,
        "hopper",
        True,
        False,
        bandwidth_gbs=2000,
        bf16_tflops=756,
        fp8_tflops=1513,
        form="pcie",
        reference_system="h100_sxm",
        source=_NV + "h100/",
        memory_source="torch: _CudaDeviceProperties(name='NVIDIA H100 PCIe', total_memory=81008MB)",
        aic_roofline_system="h100_pcie",
        label="NVIDIA H100 80GB PCIe",
        memory_gb=80,
    ),
    GpuSpec(
        "H100-NVL",
        _derived(95830, 0.46),
        "hopper",
        True,
        False,
        bandwidth_gbs=3900,
        bf16_tflops=835,
        fp8_tflops=1671,
        form="pcie",
        reference_system="h100_sxm",
        source=_NV + "h100/",
        memory_source=_DERIVED_HOPPER.format(mib=95830),
        label="NVIDIA H100 NVL 94GB",
        memory_gb=94,
    ),
    GpuSpec(
        "H200",
        139.81,
        "hopper",
        True,
        False,
        bandwidth_gbs=4800,
        bf16_tflops=989,
        fp8_tflops=1979,
        form="sxm",
        aic_system="h200_sxm",
        reference_system="h100_sxm",
        source=_NV + "h200/",
        memory_source="vLLM: total_gpu_memory (139.81GiB) beside nvidia-smi 143,771 MiB",
        label="NVIDIA H200 141GB SXM",
        memory_gb=141,
    ),
    GpuSpec(
        "GH200",
        _derived(97871, 0.46),
        "hopper",
        True,
        False,
        bandwidth_gbs=4000,
        bf16_tflops=989,
        fp8_tflops=1979,
        form="superchip",
        reference_system="h100_sxm",
        source=_NV + "grace-hopper-superchip/",
        memory_source=_DERIVED_HOPPER.format(mib=97871) + " (GH200 480GB: 96 GB HBM3)",
        label="NVIDIA GH200 Grace Hopper (96 GB HBM3)",
        memory_gb=96,
    ),
    GpuSpec(
        "GH200-144GB",
        _derived(146831, 0.46),
        "hopper",
        True,
        False,
        bandwidth_gbs=4900,
        bf16_tflops=989,
        fp8_tflops=1979,
        form="superchip",
        reference_system="h100_sxm",
        source=_NV + "grace-hopper-superchip/",
        memory_source=_DERIVED_HOPPER.format(mib=146831) + " (GH200 144G HBM3e)",
        label="NVIDIA GH200 Grace Hopper (144 GB HBM3e)",
        memory_gb=144,
    ),
    GpuSpec(
        "B200",
        178.35,
        "blackwell",
        True,
        True,
        bandwidth_gbs=7700,
        bf16_tflops=2250,
        fp8_tflops=4500,
        fp4_tflops=9000,
        form="sxm",
        aic_system="b200_sxm",
        reference_system="b200_sxm",
        source=_NV + "hgx/",
        memory_source="vLLM: Free memory on device (…/178.35 GiB), nvidia-smi 183,359 MiB",
        label="NVIDIA B200 180GB (HGX)",
        memory_gb=180,
    ),
    GpuSpec(
        "B300",
        _derived(275040, 0.71),
        "blackwell",
        True,
        True,
        bandwidth_gbs=7750,
        bf16_tflops=2250,
        fp8_tflops=4500,
        fp4_tflops=13500,
        form="sxm",
        aic_system="b300_sxm",
        reference_system="b200_sxm",
        source="https://resources.nvidia.com/en-us-blackwell-architecture/blackwell-ultra-datasheet",
        memory_source=_DERIVED_BW.format(mib=275040),
        label="NVIDIA B300 288GB (HGX Blackwell Ultra)",
        memory_gb=288,
    ),
    GpuSpec(
        "GB200",
        _derived(189471, 0.71),
        "blackwell",
        True,
        True,
        bandwidth_gbs=8000,
        bf16_tflops=2500,
        fp8_tflops=5000,
        fp4_tflops=10000,
        form="superchip",
        aic_system="gb200",
        reference_system="b200_sxm",
        source=_NV + "gb200-nvl72/",
        memory_source=_DERIVED_BW.format(mib=189471),
        label="NVIDIA GB200 (one Blackwell GPU of the superchip)",
        memory_gb=186,
    ),
    GpuSpec(
        "MI300X",
        191.45,
        "cdna3",
        True,
        False,
        vendor="amd",
        bandwidth_gbs=5300,
        bf16_tflops=1307.4,
        fp8_tflops=2614.9,
        form="oam",
        reference_system=None,
        source="https://www.amd.com/en/products/accelerators/instinct/mi300/mi300x.html",
        memory_source="vLLM on ROCm: total_gpu_memory (191.45GiB)",
        label="AMD Instinct MI300X",
        memory_gb=192,
    ),
    GpuSpec(
        "RTX-PRO-6000",
        94.97,
        "blackwell",
        True,
        True,
        bandwidth_gbs=1792,
        bf16_tflops=467.8,
        fp8_tflops=935.6,
        fp4_tflops=1871.2,
        form="workstation",
        aic_system="rtx_pro_6000_server",
        reference_system="rtx_pro_6000_server",
        source="https://www.nvidia.com/en-us/products/workstations/professional-desktop-gpus/rtx-pro-6000/",
        memory_source="vLLM: Free memory on device (…/94.97 GiB) on Linux; 95.59 GiB on Windows",
        label="NVIDIA RTX PRO 6000 Blackwell (Workstation/Server Edition, 600 W)",
        memory_gb=96,
    ),
    GpuSpec(
        "RTX-3090",
        23.70,
        "ampere",
        False,
        False,
        bandwidth_gbs=936,
        bf16_tflops=71,
        form="consumer",
        reference_system="a100_sxm",
        source=_AMPERE_WP,
        memory_source="torch: _CudaDeviceProperties(name='GeForce RTX 3090', total_memory=24268MB)",
        label="NVIDIA GeForce RTX 3090",
        memory_gb=24,
    ),
    GpuSpec(
        "RTX-4090",
        23.65,
        "ada",
        True,
        False,
        bandwidth_gbs=1008,
        bf16_tflops=165.2,
        fp8_tflops=330.3,
        form="consumer",
        reference_system="l40s",
        source=_ADA_WP,
        memory_source="vLLM on Linux: total_gpu_memory (23.65GiB); Windows shows 23.99 GiB",
        label="NVIDIA GeForce RTX 4090",
        memory_gb=24,
    ),
    GpuSpec(
        "RTX-5090",
        31.37,
        "blackwell",
        True,
        True,
        bandwidth_gbs=1792,
        bf16_tflops=209.5,
        fp8_tflops=419,
        fp4_tflops=838,
        form="consumer",
        reference_system="rtx_pro_6000_server",
        source=_BW_WP,
        memory_source="vLLM on Linux: total_gpu_memory (31.37GiB); Windows/WSL shows 31.84 GiB",
        label="NVIDIA GeForce RTX 5090",
        memory_gb=32,
    ),
)

GPUS: dict[str, GpuSpec] = {g.name: g for g in _ALL}

# A shorter list for "each other GPU" what-if rows: the data-center cards teams rent or buy.
WHATIF_GPUS: tuple[str, ...] = (
    "L4", "L40S", "A100-80GB", "H100", "H200", "B200", "B300", "RTX-PRO-6000", "MI300X",
)  # fmt: skip

# Other spellings users type (case-insensitive) → catalog names.
GPU_ALIASES: dict[str, str] = {
    "h100-sxm": "H100",
    "h100-80gb": "H100",
    "h100 sxm": "H100",
    "h100-pcie-80gb": "H100-PCIe",
    "h100 nvl": "H100-NVL",
    "h200-sxm": "H200",
    "b200-sxm": "B200",
    "a100-sxm-80gb": "A100-80GB",
    "a100-sxm-40gb": "A100-40GB",
    "a100-pcie": "A100-PCIe-80GB",
    "rtx 3090": "RTX-3090",
    "rtx 4090": "RTX-4090",
    "rtx 5090": "RTX-5090",
    "rtx pro 6000": "RTX-PRO-6000",
    "rtx-pro-6000-blackwell": "RTX-PRO-6000",
    "mi300x": "MI300X",
}


def gpu_named(name: str) -> GpuSpec | None:
    """The catalog GPU for a name or an alias (case-insensitive), else None."""
    if name in GPUS:
        return GPUS[name]
    lowered = name.strip().lower()
    for key, spec in GPUS.items():
        if key.lower() == lowered:
            return spec
    alias = GPU_ALIASES.get(lowered) or GPU_ALIASES.get(lowered.replace("_", "-"))
    return GPUS[alias] if alias else None


def custom_gpu(
    *,
    memory_gib: float,
    arch: str,
    bandwidth_gbs: float = 0.0,
    bf16_tflops: float = 0.0,
    fp8_tflops: float | None = None,
    fp4_tflops: float | None = None,
    name: str = "custom",
    vendor: str | None = None,
) -> GpuSpec:
    """A GPU outside the catalog, described by its memory, bandwidth and FLOPS.

    FP8 follows the architecture (Ada, Hopper, Blackwell, CDNA3) unless `fp8_tflops` is given
    as 0; FP4 likewise (Blackwell). The roofline reference is the architecture's."""
    if arch not in ARCHES:
        raise ValueError(f"gpu_arch must be one of {', '.join(ARCHES)}, not {arch!r}")
    fp8 = arch in FP8_ARCHES and fp8_tflops != 0
    fp4 = arch in FP4_ARCHES and fp4_tflops != 0
    return GpuSpec(
        name,
        memory_gib,
        arch,
        fp8,
        fp4,
        vendor=vendor or ("amd" if arch == "cdna3" else "nvidia"),
        bandwidth_gbs=bandwidth_gbs,
        bf16_tflops=bf16_tflops,
        fp8_tflops=(fp8_tflops or 0.0) if fp8 else 0.0,
        fp4_tflops=(fp4_tflops or 0.0) if fp4 else 0.0,
        form="pcie",
        aic_system=None,
        reference_system=REFERENCE_BY_ARCH[arch],
        source="described in the profile",
        memory_source="given in the profile",
        label=name,
    )


def with_memory(gpu: GpuSpec, memory_gib: float) -> GpuSpec:
    """The same card with another CUDA-reported total (a profile's override)."""
    return replace(gpu, memory_gib=memory_gib, memory_source="overridden in the profile")
