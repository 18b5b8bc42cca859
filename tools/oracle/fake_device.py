"""The device an oracle run pretends to be on: torch's device queries and the vendor tools the engines
shell out to (nvidia-smi, rocminfo) answer as the chosen target would, before the engine is imported.

Nothing here allocates on a device: a real allocation fails on the CPU build of torch, and that is the
oracle's edge (the engines' model runner and attention backend init lie beyond it).
"""

from __future__ import annotations

import os
import stat
import sys
import tempfile
import types
from dataclasses import dataclass

MIB = 1 << 20


@dataclass(frozen=True)
class FakeDevice:
    name: str  # the oracle's target name
    kind: str  # cuda | rocm | xpu | npu | cpu
    product: str
    memory_mib: int
    capability: tuple[int, int] = (0, 0)
    sms: int = 0
    has_fp64: bool = True  # XPU: SGLang reads XMX support from has_fp64 (utils/common.py xpu_has_xmx_support)


# One real product per target, with its memory as the vendor tool reports it.
TARGETS = {
    "cuda-hopper": FakeDevice("cuda-hopper", "cuda", "NVIDIA H100 80GB HBM3", 81559, (9, 0), 132),
    "cuda-blackwell": FakeDevice("cuda-blackwell", "cuda", "NVIDIA B200", 183359, (10, 0), 148),
    "rocm": FakeDevice("rocm", "rocm", "AMD Instinct MI300X", 196592, (9, 4), 304),
    "xpu": FakeDevice("xpu", "xpu", "Intel(R) Data Center GPU Max 1550", 65536),
    "npu": FakeDevice("npu", "npu", "Ascend910B3", 65536),
    "cpu": FakeDevice("cpu", "cpu", "x86_64", 0),
}


def _props(d: FakeDevice):
    return types.SimpleNamespace(
        name=d.product, total_memory=d.memory_mib * MIB, major=d.capability[0], minor=d.capability[1],
        multi_processor_count=d.sms, has_fp64=d.has_fp64, gcnArchName="gfx942" if d.kind == "rocm" else "",
        max_compute_units=d.sms or 64, driver_version="1.0", platform_name=d.product, type="gpu",
        L2_cache_size=50 * MIB, warp_size=64 if d.kind == "rocm" else 32, uuid="00000000-oracle",
    )


def _tool_dir(d: FakeDevice) -> str:
    """nvidia-smi / rocminfo scripts answering the queries SGLang and vLLM make."""
    folder = tempfile.mkdtemp(prefix="oracle-bin-")
    scripts = {}
    if d.kind == "cuda":
        cap = f"{d.capability[0]}.{d.capability[1]}"
        scripts["nvidia-smi"] = (
            "#!/bin/sh\ncase \"$*\" in\n"
            f"  *memory.total*) echo {d.memory_mib};;\n  *compute_cap*) echo {cap};;\n"
            f"  *name*) echo '{d.product}';;\n  *) echo 'GPU 0: {d.product}';;\nesac\n")
    if d.kind == "rocm":
        scripts["rocminfo"] = (f"#!/bin/sh\necho '  Name: gfx942'\necho '  Pool 1'\n"
                               f"echo '      Size:                    {d.memory_mib * 1024}(0x0) KB'\n")
    for name, text in scripts.items():
        path = os.path.join(folder, name)
        with open(path, "w") as f:
            f.write(text)
        os.chmod(path, stat.S_IRWXU)
    return folder


def install(target: str) -> FakeDevice:
    """Make torch (already imported or not) answer as `target`; set the engines' env switches for it."""
    import torch

    d = TARGETS[target]
    os.environ["PATH"] = _tool_dir(d) + os.pathsep + os.environ.get("PATH", "")
    props = _props(d)
    gpu = d.kind in ("cuda", "rocm")
    cuda = torch.cuda
    cuda.is_available = lambda: gpu
    cuda.device_count = lambda: 8 if gpu else 0
    if gpu:
        cuda.get_device_capability = lambda *a, **k: d.capability
        cuda.get_device_name = lambda *a, **k: d.product
        cuda.get_device_properties = lambda *a, **k: props
        cuda.mem_get_info = lambda *a, **k: (d.memory_mib * MIB * 95 // 100, d.memory_mib * MIB)
        cuda.current_device = lambda: 0
        cuda.set_device = lambda *a, **k: None
        cuda.is_bf16_supported = lambda *a, **k: True
        torch.version.cuda = "12.9" if d.kind == "cuda" else None
        torch.version.hip = "6.4.43482" if d.kind == "rocm" else None
        torch.backends.cudnn.version = lambda: 91000
    else:
        torch.version.cuda = None
        torch.version.hip = None
    xpu = torch.xpu
    xpu.is_available = lambda: d.kind == "xpu"
    if d.kind == "xpu":
        xpu.device_count = lambda: 8
        xpu.get_device_properties = lambda *a, **k: props
        xpu.get_device_name = lambda *a, **k: d.product
        xpu.get_device_capability = lambda *a, **k: {"version": "12.60.7", "has_fp64": d.has_fp64}
        xpu.mem_get_info = lambda *a, **k: (d.memory_mib * MIB * 95 // 100, d.memory_mib * MIB)
        xpu.current_device = lambda: 0
        xpu.set_device = lambda *a, **k: None
    if d.kind == "npu":
        _fake_npu(torch, d, props)
    if d.kind == "cpu":
        os.environ["SGLANG_USE_CPU_ENGINE"] = "1"
        os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")
    return d


def _fake_npu(torch, d: FakeDevice, props) -> None:
    """torch_npu adds torch.npu; stand it in as a module with the queries the engines make."""
    npu = types.ModuleType("torch.npu")
    npu.is_available = lambda: True
    npu.device_count = lambda: 8
    npu.get_device_name = lambda *a, **k: d.product
    npu.get_device_properties = lambda *a, **k: props
    npu.mem_get_info = lambda *a, **k: (d.memory_mib * MIB * 95 // 100, d.memory_mib * MIB)
    npu.current_device = lambda: 0
    npu.set_device = lambda *a, **k: None
    torch.npu = npu
    sys.modules["torch.npu"] = npu
    import importlib.machinery

    torch_npu = types.ModuleType("torch_npu")
    torch_npu.__spec__ = importlib.machinery.ModuleSpec("torch_npu", None, is_package=True)
    torch_npu.__path__ = []
    torch_npu.npu = npu
    torch_npu.__version__ = "2.8.0+oraclestub"
    sys.modules["torch_npu"] = torch_npu


# PCI device id of each ROCm target's product, as amdsmi reports it (vLLM maps it to a name:
# platforms/rocm.py:77-79 `0x74a1: AMD_Instinct_MI300X`).
AMD_DEVICE_IDS = {"rocm": "0x74a1"}


def install_amdsmi(d: FakeDevice) -> None:
    """AMD's amdsmi module, answering as the ROCm target's driver would. vLLM finds ROCm, its memory (the
    batch defaults' tier, engine/arg_utils.py:2959-2990) and its name through amdsmi (platforms/__init__.py
    rocm_platform_plugin, rocm.py:193-197, :1063-1073); without it the name query fails, and vLLM's
    batch defaults fall back to a device of 0 bytes, which no MI300X start sees."""
    amdsmi = types.ModuleType("amdsmi")

    class AmdSmiException(Exception):
        pass

    amdsmi.AmdSmiException = AmdSmiException
    amdsmi.AmdSmiMemoryType = types.SimpleNamespace(VRAM=0, VIS_VRAM=1, GTT=2)
    amdsmi.amdsmi_init = lambda *a, **k: None
    amdsmi.amdsmi_shut_down = lambda *a, **k: None
    amdsmi.amdsmi_get_processor_handles = lambda: list(range(8))
    amdsmi.amdsmi_get_gpu_asic_info = lambda h: {"market_name": d.product, "device_id": AMD_DEVICE_IDS[d.name],
                                                 "target_graphics_version": "gfx942"}
    amdsmi.amdsmi_get_gpu_memory_total = lambda h, kind: d.memory_mib * MIB
    amdsmi.amdsmi_get_gpu_device_uuid = lambda h: f"oracle-{h}"
    amdsmi.amdsmi_topo_get_link_type = lambda a, b: {"hops": 1, "type": 2}
    amdsmi.amdsmi_topo_get_numa_node_number = lambda h: 0
    sys.modules["amdsmi"] = amdsmi
