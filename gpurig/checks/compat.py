"""Driver, CUDA and GPU compatibility rules, as pure functions over versions and arch lists,
applied to a host's driver, GPUs and containers' torch by gpurig/checks/compat_checks.py.

The drift evaluator and `gpurig compat` both call these, so a rule is written once and its
findings carry the `expected`/`actual`/`fix` a report needs. The numbers come from the tables
in `gpurig/data/` (each row names its source), never from this file.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from gpurig.checks.rules import ByInput, found, rules
from gpurig.data.tables import table
from gpurig.named_tuple import NamedTuple
from gpurig.spec.finding import Finding
from gpurig.spec.pattern import lazy

Verdict = Literal["ok", "warn", "fail"]
IDS = ("compat.kernel_module", "compat.driver_cuda", "compat.torch_arch")
TORCH = "torch build"  # the subject offline; a host's findings name the container
DRIVER = "NVIDIA driver"  # the subject of what concerns the driver (gpu_checks' too)

_VERSION_RE = lazy(r"\d+(?:\.\d+){1,2}")
_CAPABILITY_RE = lazy(r"(\d+)\.(\d)")
# sm_90, sm_120, compute_90, sm_90a, sm_100f: the last digit is the minor capability.
_TARGET_RE = lazy(r"(sm|compute)_(\d+)(\d)([af]?)")


class Target(NamedTuple):
    """A compiled target from `torch.cuda.get_arch_list()`: a cubin (sm_) or PTX (compute_)."""

    name: str
    ptx: bool
    capability: tuple[int, int]
    suffix: str  # "" plain, "a" architecture-specific, "f" family-specific


def parse_version(text: str, what: str = "driver version") -> tuple[int, ...]:
    """Parse a 2- or 3-part version ('570.124.04', '595.84', '12.8') into its integer parts.

    Drivers exist in both shapes (610.57.04 and 610.62), so both must parse; anything else is a
    typo that would silently compare wrong, hence the ValueError.
    """
    stripped = text.strip()
    if not _VERSION_RE.fullmatch(stripped):
        raise ValueError(f"{what} {text!r} is not a version like 570.124.04 or 595.84")
    return tuple(int(part) for part in stripped.split("."))


def _key(version: tuple[int, ...]) -> tuple[int, ...]:
    """Pad to three parts so 595.84 compares equal to 595.84.0 and below 595.84.1."""
    return version + (0,) * (3 - len(version))


def parse_capability(text: str) -> tuple[int, int]:
    """Parse a compute capability as nvidia-smi's compute_cap prints it ('9.0', '12.0')."""
    match = _CAPABILITY_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"compute capability {text!r} is not like 8.9 or 12.0")
    return int(match[1]), int(match[2])


def parse_target(name: str) -> Target:
    """Parse one arch-list item (sm_80, compute_90, sm_90a, sm_100f)."""
    match = _TARGET_RE.fullmatch(name.strip())
    if match is None:
        raise ValueError(f"arch {name!r} is not like sm_80, compute_90, sm_90a or sm_100f")
    kind, major, minor, suffix = match.groups()
    return Target(name.strip(), kind == "compute", (int(major), int(minor)), suffix)


def _cc_text(capability: tuple[int, int]) -> str:
    return f"{capability[0]}.{capability[1]}"


def architecture_name(capability: tuple[int, int]) -> str:
    """Name the GPU family for messages ('Hopper'); unknown capabilities say so."""
    return table("gpu_arch.yaml")["capabilities"].get(_cc_text(capability), "unknown architecture")


def release_minimum(cuda: str) -> tuple[str, str] | None:
    """Lowest driver for a CUDA release: (release name, min driver), or None if not tabled.

    'major.minor' (torch.version.cuda) takes the most lenient row of that minor (its GA), since
    the update the wheel was built with is not known; 'major.minor.patch' takes its exact row.
    """
    wanted = parse_version(cuda, "CUDA version")
    rows = [
        row
        for row in table("cuda_drivers.yaml")["toolkit_releases"]
        if parse_version(row["cuda"])[: len(wanted)] == wanted
    ]
    if not rows:
        return None
    row = min(rows, key=lambda r: _key(parse_version(r["min_driver"])))
    return row["release"], row["min_driver"]


def minor_version_floor(cuda: str) -> str:
    """Lowest driver that runs any release of this CUDA major (minor-version compatibility)."""
    major = parse_version(cuda, "CUDA version")[0]
    for row in table("cuda_drivers.yaml")["minor_version_compatibility"]:
        if row["cuda_major"] == major:
            return str(row["min_driver"])
    raise ValueError(f"CUDA {cuda}: no driver table for CUDA {major}.x (gpurig covers 11.x-13.x)")


def needs_minor_version_compat(driver: str, cuda: str) -> bool:
    """True when the driver is below the release's own minimum (it may still reach the floor)."""
    release = release_minimum(cuda)
    if release is None:
        return False
    return _key(parse_version(driver)) < _key(parse_version(release[1]))


def driver_cuda_by_input() -> list[ByInput]:
    """compat.driver_cuda's severity per reading, as check_driver_cuda judges it, with the
    floors of cuda_drivers.yaml."""
    remedy = rules()["checks"]["compat.driver_cuda"]["remediation"]
    floors = ", ".join(
        f"{row['cuda_major']}.x: {row['min_driver']}"
        for row in table("cuda_drivers.yaml")["minor_version_compatibility"]
    )
    return [
        ByInput("error", remedy, f"a driver below the CUDA major's minor-version floor ({floors})"),
        ByInput("warn", remedy, "a driver at or above that floor but below the CUDA release's "
                "own minimum, or a CUDA release not in gpurig's table (only the floor checked)"),
    ]  # fmt: skip


def check_driver_cuda(driver: str, cuda: str, subject: str = TORCH) -> list[Finding]:
    """Is the driver new enough for a torch built against `cuda` (torch.version.cuda)?

    The release's own minimum is checked first: CUDA 11.0 GA needs only 450.51.05, below the
    11.x minor-version floor (450.80.02), which governs running newer 11.x builds on old drivers.
    """
    release = release_minimum(cuda)
    if release is not None and not needs_minor_version_compat(driver, cuda):
        return []
    floor = minor_version_floor(cuda)
    major = parse_version(cuda, "CUDA version")[0]
    wanted = release[1] if release else floor
    if _key(parse_version(driver)) < _key(parse_version(floor)):
        return [
            found(
                "compat.driver_cuda",
                subject,
                f"driver {driver} is older than {floor}, the minimum for any CUDA {major}.x "
                f"(minor-version compatibility); CUDA {cuda} will not initialise "
                "('CUDA driver version is insufficient for CUDA runtime version')",
                expected=f">= {wanted}",
                actual=driver,
                fix=f"install NVIDIA driver >= {wanted}, or use a torch build for an older CUDA",
            )
        ]
    if release is None:
        return [
            found(
                "compat.driver_cuda",
                subject,
                f"CUDA {cuda} is not in gpurig's driver table; only the CUDA {major}.x "
                f"minor-version floor ({floor}) was checked",
                expected=f">= {floor}",
                actual=driver,
                fix="check the CUDA release notes for this release's minimum driver",
                severity="warn",
            )
        ]
    return [
        found(
            "compat.driver_cuda",
            subject,
            f"driver {driver} is below {release[1]} ({release[0]}), so CUDA {cuda} runs only "
            "through minor-version compatibility: newer PTX cannot be JIT-compiled and "
            "features that need a newer driver fail",
            expected=f">= {release[1]}",
            actual=driver,
            fix=f"install NVIDIA driver >= {release[1]}",
            severity="warn",
        )
    ]


def check_kernel_module(driver: str, kernel_module: str) -> list[Finding]:
    """Does the loaded kernel module match the user-space driver? NVML refuses to start if not."""
    if _key(parse_version(driver)) == _key(parse_version(kernel_module, "kernel module version")):
        return []
    return [
        found(
            "compat.kernel_module",
            DRIVER,
            f"loaded kernel module {kernel_module} differs from user-space driver {driver}: "
            "nvidia-smi and CUDA fail with 'Driver/library version mismatch'",
            expected=driver,
            actual=kernel_module,
            fix="reboot (or reload the nvidia kernel modules) so the loaded module matches the "
            "installed user-space driver, or reinstall one to match the other",
        )
    ]


def _runs_on(target: Target, capability: tuple[int, int]) -> bool:
    """Can this target execute on a GPU of `capability` (PTX: after JIT)?"""
    if target.suffix == "a":
        return target.capability == capability
    if target.suffix == "f":
        family = table("gpu_arch.yaml")["families"].get(_cc_text(target.capability), [])
        return _cc_text(capability) in family or target.capability == capability
    if target.ptx:
        return target.capability <= capability
    return target.capability[0] == capability[0] and target.capability[1] <= capability[1]


def _by_capability(target: Target) -> tuple[int, int]:
    return target.capability


def torch_arch_by_input() -> list[ByInput]:
    """compat.torch_arch's severity per reading, as check_torch_arch judges it."""
    remedy = rules()["checks"]["compat.torch_arch"]["remediation"]
    return [
        ByInput("error", remedy, "no cubin or PTX in the arch list fits the GPU's capability, "
                "or only PTX fits and the driver is below the CUDA release's minimum (no JIT)"),
        ByInput("warn", remedy, "only PTX fits: kernels are JIT-compiled at the first start"),
    ]  # fmt: skip


def check_torch_arch(
    arch_list: Sequence[str], capability: str, *, ptx_jit: bool = True, subject: str = TORCH
) -> list[Finding]:
    """Can a torch build with `arch_list` run kernels on a GPU of `capability`?

    A fitting cubin is fine; PTX alone works after a slow JIT (and only if the driver can JIT
    it: `ptx_jit=False` under minor-version compatibility); nothing fitting is torch's
    "no kernel image is available for execution on the device".
    """
    targets = [parse_target(name) for name in arch_list]
    cc = parse_capability(capability)
    sm = f"sm_{cc[0]}{cc[1]}"
    arch = f"{_cc_text(cc)} ({architecture_name(cc)})"
    listed = " ".join(t.name for t in targets) or "(empty)"
    if any(not t.ptx and _runs_on(t, cc) for t in targets):
        return []
    fitting_ptx = sorted((t for t in targets if t.ptx and _runs_on(t, cc)), key=_by_capability)
    ptx = [t.name for t in fitting_ptx]
    fix = f"install a torch build whose arch list includes {sm}"
    if ptx and ptx_jit:
        return [
            found(
                "compat.torch_arch",
                subject,
                f"no cubin for capability {arch} in [{listed}]; kernels are JIT-compiled from "
                f"{ptx[-1]} PTX: slow first start, and the driver must support that PTX",
                expected=sm,
                actual=listed,
                fix=fix,
                severity="warn",
            )
        ]
    reason = (
        f"only {ptx[-1]} PTX fits and the driver is below this CUDA release's minimum, "
        "so it cannot JIT-compile that PTX"
        if ptx
        else "no cubin or PTX fits"
    )
    return [
        found(
            "compat.torch_arch",
            subject,
            f"torch cannot run on capability {arch}: {reason} in [{listed}] "
            "('no kernel image is available for execution on the device')",
            expected=sm,
            actual=listed,
            fix=fix,
        )
    ]


def judge(
    driver: str,
    kernel_module: str | None = None,
    cuda: str | None = None,
    arch_list: Sequence[str] | None = None,
    capability: str | None = None,
    subject: str = TORCH,
) -> tuple[Verdict, list[Finding]]:
    """Judge one driver/module/CUDA/arch/GPU combination: 'fail' on any error, else 'warn'/'ok'.
    `subject` names the torch build in the findings (a host's container)."""
    parse_version(driver)
    if (arch_list is None) != (capability is None):
        raise ValueError("an arch list and a compute capability are only judged together")
    findings: list[Finding] = []
    if kernel_module is not None:
        findings += check_kernel_module(driver, kernel_module)
    if cuda is not None:
        findings += check_driver_cuda(driver, cuda, subject)
    if arch_list is not None and capability is not None:
        ptx_jit = cuda is None or not needs_minor_version_compat(driver, cuda)
        findings += check_torch_arch(arch_list, capability, ptx_jit=ptx_jit, subject=subject)
    if any(f.severity == "error" for f in findings):
        return "fail", findings
    return ("warn" if findings else "ok"), findings
