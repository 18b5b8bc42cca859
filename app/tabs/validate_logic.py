"""What the Validate tab asks of `bringup.core` (rules and probe), shaped for its widgets. No Qt here.

Kept apart from the widgets so the tab's layout code reads as layout, and so the mapping from
core's reports to rows and cells can be tested without a window.
"""

from __future__ import annotations

from bringup.core.errors import UserError  # noqa: F401  (re-exported: the tab catches it)

# ---- the device probe ----------------------------------------------------------------------------

LAYER_TITLES = {"libraries": "Libraries", "runtime": "Devices"}


def probe_rows(report) -> tuple[list[tuple[str, str, str, str, str]], str, bool]:
    """(group, name, verdict, detail, title) rows, a one-line status, and whether nothing crashed or hung."""
    rows = [(LAYER_TITLES.get(s.layer, s.layer), s.name, s.verdict, s.detail, s.title) for s in report.steps]
    broken = [s for s in report.steps if s.verdict in ("crashed", "timeout")]
    failed = [s for s in report.steps if s.verdict == "failed"]
    available = report.available_devices()
    status = f"Probed in {report.seconds:.1f} s"
    if report.children > 1:
        status += f" ({report.children} processes)"
    status += f": {', '.join(available) or 'no device'} available."
    if broken:
        what = "; ".join(f"'{s.name}' {s.verdict}" for s in broken)
        status += f" Step {what}: the rest ran in a fresh process, and the window is unaffected."
    elif failed:
        status += f" {len(failed)} step{'s' if len(failed) > 1 else ''} raised an error."
    return rows, status, not broken


def preferred_device(report) -> str | None:
    """The accelerator this machine has (xpu first), or None when it has only a CPU: planning an
    XPU launch from a laptop is common, so a CPU-only probe leaves the form alone."""
    available = report.available_devices()
    for kind in ("xpu", "cuda", "npu", "mps"):
        if kind in available:
            return kind
    return None


# ---- the launch rules ----------------------------------------------------------------------------

def choices() -> dict[str, list[str]]:
    """What the settings form offers, from the rules' own vocabulary."""
    from bringup.core.rules import settings
    from bringup.core.rules.sglang_backends import ALL_BACKENDS
    from bringup.core.rules.targets import known_targets, vllm_targets

    return {
        "targets": list(known_targets()) + vllm_targets(),  # embedded, SGLang's profiles oldest first, vLLM
        "devices": list(settings.DEVICES),
        "gpu_generations": list(settings.GPU_GENERATIONS),
        "attention_backends": list(ALL_BACKENDS),
        "strategies": list(settings.MAMBA_STRATEGIES),
        "dtypes": list(settings.DTYPES),
        "kv_dtypes": list(settings.KV_DTYPES),
        "ssm_dtypes": list(settings.SSM_DTYPES),
        "memory_presets": memory_presets(),
    }


def memory_presets() -> list[tuple[str, int, str]]:
    """(label, bytes of one device, source) of the real devices a launch can be planned on."""
    from bringup.core.planner.device_presets import PRESETS

    return [(p.label, p.memory_bytes, p.source) for p in PRESETS]


def backends_for(device: str) -> list[str]:
    """SGLang's attention backends known to run on this device (the matrix's columns)."""
    from bringup.core.rules.sglang_backends import BACKENDS

    return list(BACKENDS.get(device, ()))


def launch_settings(settings: dict):
    """The form's dict (target plus LaunchSettings' fields) as (target, LaunchSettings)."""
    from bringup.core.rules.settings import LaunchSettings

    fields = {k: v for k, v in settings.items() if k not in ("target", "device_memory")}
    return settings.get("target") or "embedded", LaunchSettings(**fields)


def validate(layer_map, settings: dict, available_devices: list[str] | None = None):
    """Validate the form's settings: the `ValidationResult` (findings, resolved settings, command,
    memory plan and the Launch itself, which the Run tab starts)."""
    from bringup.core.validate.validate import validate as core_validate

    target, launch = launch_settings(settings)
    memory = settings.get("device_memory")  # bytes of one device: Validate then includes the memory plan
    return core_validate(layer_map, target, launch, available_devices=available_devices, device_memory=memory,
                         memory_how=_preset_name(memory))


def _preset_name(memory: int | None) -> str:
    return next((label for label, size, _ in memory_presets() if size == memory), "")


# ---- the compatibility matrix --------------------------------------------------------------------

# The matrix's axes: everything else in the form is held fixed while these vary.
MATRIX_AXES = ("device", "mamba_strategy", "attention_backend", "disable_radix_cache")


def matrix_key(settings: dict) -> tuple:
    """What the matrix depends on besides the model: the settings that are not its axes."""
    return tuple(sorted((k, v) for k, v in settings.items() if k not in MATRIX_AXES and k != "device_memory"))


def matrix(layer_map, settings: dict) -> dict:
    """Every device x strategy x backend for this model and target, the other settings held."""
    from bringup.core.validate.matrix import compatibility_matrix

    target, launch = launch_settings(settings)
    return compatibility_matrix(layer_map, target, launch).to_json()


def current_cell(settings: dict) -> tuple[str, str, str]:
    """The matrix cell the form's settings fall in."""
    strategy = "disabled" if settings.get("disable_radix_cache") else settings.get("mamba_strategy") or "auto"
    return settings["device"], strategy, settings.get("attention_backend") or "default"


def cell_settings(cell: dict) -> dict:
    """The form settings that select a matrix cell."""
    disabled = cell["strategy"] == "disabled"
    return {
        "device": cell["device"],
        "mamba_strategy": "auto" if disabled else cell["strategy"],
        "disable_radix_cache": disabled,
        "attention_backend": None if cell["backend"] == "default" else cell["backend"],
    }


def matrix_caption(matrix: dict) -> str:
    counts = matrix.get("counts") or {}
    target = (matrix.get("target") or {}).get("label", "")
    total = sum(counts.values())
    return (f"{matrix.get('model', '')} on {target}: {counts.get('ok', 0)} of {total} combinations work, "
            f"{counts.get('warning', 0)} with warnings, {counts.get('failure', 0)} fail. Other settings as in the "
            "form. Hover a cell for why; click it to try it.")


def xmx_of(report) -> bool | None:
    """Whether this machine's XPUs have XMX matrix engines (intel_xpu needs them), when the probe knows."""
    if report is None:
        return None
    xpu = report.devices.get("xpu")
    if xpu is None or not xpu.available:
        return None
    answers = [d.get("has_subgroup_matrix_multiply_accumulate") for d in xpu.devices]
    answers = [a for a in answers if isinstance(a, bool)]
    return all(answers) if answers else None
