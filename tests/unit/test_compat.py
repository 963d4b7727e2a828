"""Compatibility rules at every table boundary, on the arch rules, and on the judge."""

from __future__ import annotations

import pytest
from gpu_fixtures import read_fixture

from gpurig.checks import compat
from gpurig.checks.compat import check_driver_cuda, check_kernel_module, check_torch_arch, judge
from gpurig.data.tables import table
from gpurig.read import gpu_parse


def _rows() -> list[dict[str, str]]:
    return table("cuda_drivers.yaml")["toolkit_releases"]


def _one_patch_below(version: str) -> str:
    """The highest version that is still below `version` in the last part it names."""
    parts = [int(p) for p in version.split(".")]
    if parts[-1] > 0:
        parts[-1] -= 1
        return ".".join(map(str, parts))
    parts[-2] -= 1
    return ".".join(map(str, parts[:-1])) + ".999"


def _severities(findings: list[compat.Finding]) -> list[str]:
    return [f.severity for f in findings]


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["cuda"])
def test_exact_release_minimum_is_ok(row: dict[str, str]) -> None:
    assert check_driver_cuda(row["min_driver"], row["cuda"]) == []


@pytest.mark.parametrize("row", _rows(), ids=lambda r: r["cuda"])
def test_one_patch_below_release_minimum_is_not_ok(row: dict[str, str]) -> None:
    findings = check_driver_cuda(_one_patch_below(row["min_driver"]), row["cuda"])
    assert len(findings) == 1
    assert findings[0].id == "compat.driver_cuda"
    assert findings[0].expected == f">= {row['min_driver']}"


def test_table_values_against_release_notes() -> None:
    """Spot values read in NVIDIA's table, so an edit to the data file cannot slip through."""
    assert compat.release_minimum("11.8") == ("CUDA 11.8 GA", "520.61.05")
    assert compat.release_minimum("12.8") == ("CUDA 12.8 GA", "570.26")
    assert compat.release_minimum("12.8.1") == ("CUDA 12.8 Update 1", "570.124.06")
    assert compat.release_minimum("13.0") == ("CUDA 13.0 GA", "580.65.06")
    assert compat.release_minimum("13.1.1") == ("CUDA 13.1 Update 1", "590.48.01")
    assert compat.release_minimum("12.7") is None
    assert compat.minor_version_floor("11.4") == "450.80.02"
    assert compat.minor_version_floor("12.9") == "525.60.13"
    assert compat.minor_version_floor("13.2") == "580.0"


def test_every_row_cites_a_source() -> None:
    data = table("cuda_drivers.yaml")
    for row in data["toolkit_releases"] + data["minor_version_compatibility"]:
        assert row["source"].startswith("https://docs.nvidia.com/")
    arch = table("gpu_arch.yaml")
    assert all(rule["source"] for rule in arch["rules"])


def test_major_minor_uses_most_lenient_row() -> None:
    # 12.8 GA needs 570.26; 12.8 Update 1 needs 570.124.06. torch says only "12.8".
    assert check_driver_cuda("570.86.15", "12.8") == []
    assert _severities(check_driver_cuda("570.86.15", "12.8.1")) == ["warn"]


@pytest.mark.parametrize(
    ("floor", "cuda"), [("450.80.02", "11.8"), ("525.60.13", "12.4"), ("580.0", "13.1")]
)
def test_minor_version_floor_warns_at_and_fails_below(floor: str, cuda: str) -> None:
    at_floor = check_driver_cuda(floor, cuda)
    assert _severities(at_floor) == ["warn"]
    assert "minor-version compatibility" in at_floor[0].message
    below = check_driver_cuda(_one_patch_below(floor), cuda)
    assert _severities(below) == ["error"]
    assert below[0].actual == _one_patch_below(floor)


def test_cuda_11_0_release_minimum_is_below_the_11x_floor() -> None:
    # 11.0 GA shipped with 450.51.05; 450.80.02 is only needed to run newer 11.x minors.
    assert check_driver_cuda("450.51.05", "11.0") == []
    assert _severities(check_driver_cuda("450.51.05", "11.1")) == ["error"]
    assert _severities(check_driver_cuda("450.80.02", "11.1")) == ["warn"]


def test_cuda_13_on_r575_driver_fails() -> None:
    findings = check_driver_cuda("575.57.08", "13.0")
    assert _severities(findings) == ["error"]
    assert findings[0].expected == ">= 580.65.06"


def test_release_missing_from_table_checks_only_the_floor() -> None:
    assert _severities(check_driver_cuda("610.43.02", "13.4")) == ["warn"]
    assert _severities(check_driver_cuda("575.57.08", "13.4")) == ["error"]


def test_newer_driver_major_runs_older_cuda() -> None:
    assert check_driver_cuda("610.57.04", "11.8") == []


@pytest.mark.parametrize("bad", ["57x", "", "570", "570.124.04.1", "v570.124", "570..1"])
def test_bad_versions_raise_clearly(bad: str) -> None:
    with pytest.raises(ValueError, match="not a version like"):
        compat.parse_version(bad)


def test_versions_two_and_three_parts() -> None:
    assert compat.parse_version("570.124.04") == (570, 124, 4)
    assert compat.parse_version(" 595.84 ") == (595, 84)
    assert check_kernel_module("595.84", "595.84.0") == []


def test_unsupported_cuda_major_raises() -> None:
    with pytest.raises(ValueError, match=r"covers 11\.x-13\.x"):
        check_driver_cuda("570.124.04", "10.2")


def test_kernel_module_mismatch_from_recorded_failure() -> None:
    # Fixture: user space 570.124.04 with kernel module 570.124.06 loaded.
    assert gpu_parse.parse_nvml_mismatch(read_fixture("driver_mismatch_nvml-570.124.txt")) == (
        "570.124"
    )
    findings = check_kernel_module("570.124.04", "570.124.06")
    assert [(f.id, f.severity) for f in findings] == [("compat.kernel_module", "error")]
    assert "Driver/library version mismatch" in findings[0].message
    assert check_kernel_module("570.124.06", "570.124.06") == []


# --- torch arch list vs GPU capability ---------------------------------------------------------


@pytest.mark.parametrize(
    ("arch_list", "capability"),
    [
        (["sm_80", "sm_90"], "9.0"),  # native cubin
        (["sm_80"], "8.6"),  # same-major older cubin
        (["sm_80", "sm_86"], "8.9"),  # 8.6 cubin runs on Ada 8.9
        (["sm_90a"], "9.0"),  # arch-specific target on exactly its capability
        (["sm_100f"], "10.3"),  # family target on a family member
        (["sm_120"], "12.0"),
    ],
)
def test_torch_arch_ok(arch_list: list[str], capability: str) -> None:
    assert check_torch_arch(arch_list, capability) == []


def test_arch_specific_target_is_not_forward_compatible() -> None:
    findings = check_torch_arch(["sm_100a"], "10.3")
    assert _severities(findings) == ["error"]


def test_family_target_does_not_cross_majors() -> None:
    assert _severities(check_torch_arch(["sm_100f"], "12.0")) == ["error"]


def test_cubin_does_not_run_on_older_minor_or_other_major() -> None:
    assert _severities(check_torch_arch(["sm_86"], "8.0")) == ["error"]
    assert _severities(check_torch_arch(["sm_80"], "9.0")) == ["error"]


def test_ptx_only_warns() -> None:
    findings = check_torch_arch(["sm_80", "compute_80"], "9.0")
    assert _severities(findings) == ["warn"]
    assert "compute_80" in findings[0].message
    assert findings[0].expected == "sm_90"


def test_ptx_warning_names_the_newest_fitting_ptx() -> None:
    findings = check_torch_arch(["compute_90", "compute_80"], "9.0")
    assert "compute_90 PTX" in findings[0].message


def test_newer_ptx_does_not_run_on_older_gpu() -> None:
    assert _severities(check_torch_arch(["compute_90"], "8.9")) == ["error"]


def test_ptx_only_fails_when_driver_cannot_jit() -> None:
    assert _severities(check_torch_arch(["compute_80"], "9.0", ptx_jit=False)) == ["error"]


def test_rtx5090_with_arch_list_up_to_sm90_fails() -> None:
    # Fixture: torch's own warning on an RTX 5090, listing the build's capabilities.
    warning = gpu_parse.parse_torch_capability_warning(
        read_fixture("torch_warning_rtx5090_sm120_windows.txt")
    )
    assert warning is not None
    findings = check_torch_arch(warning.supported, "12.0")
    assert _severities(findings) == ["error"]
    assert "no kernel image is available" in findings[0].message
    assert findings[0].expected == "sm_120"
    assert gpu_parse.has_no_kernel_image_error(
        read_fixture("torch_error_no-kernel-image_rtx5090_journald-prefixed.txt")
    )


def test_recorded_cu11x_arch_list_on_hopper_fails() -> None:
    arch_list = gpu_parse.parse_torch_arch_list(read_fixture("torch_arch_list_docker_cu11x.txt"))
    assert _severities(check_torch_arch(arch_list, "9.0")) == ["error"]
    assert check_torch_arch(arch_list, "8.9") == []


@pytest.mark.parametrize("bad", ["sm80", "sm_8", "gfx90a", "sm_90x"])
def test_bad_arch_raises(bad: str) -> None:
    with pytest.raises(ValueError, match="arch"):
        check_torch_arch([bad], "9.0")


def test_bad_capability_raises() -> None:
    with pytest.raises(ValueError, match="compute capability"):
        check_torch_arch(["sm_90"], "sm_90")


def test_architecture_names_from_table() -> None:
    assert compat.architecture_name((8, 9)) == "Ada"
    assert compat.architecture_name((9, 0)) == "Hopper"
    assert compat.architecture_name((12, 0)) == "Blackwell"
    assert compat.architecture_name((4, 0)) == "unknown architecture"


# --- judge ---------------------------------------------------------------------------------------


def test_judge_ok() -> None:
    assert judge("580.65.06", "580.65.06", "12.8", ["sm_80", "sm_90"], "9.0") == ("ok", [])


def test_judge_warn_and_fail() -> None:
    verdict, findings = judge("525.60.13", cuda="12.4")
    assert verdict == "warn"
    assert [f.id for f in findings] == ["compat.driver_cuda"]
    verdict, findings = judge("570.124.04", kernel_module="570.124.06")
    assert verdict == "fail"


def test_judge_ptx_under_minor_version_compat_fails() -> None:
    verdict, findings = judge("525.60.13", cuda="12.4", arch_list=["compute_80"], capability="9.0")
    assert verdict == "fail"
    assert _severities(findings) == ["warn", "error"]


def test_judge_needs_arch_list_and_capability_together() -> None:
    with pytest.raises(ValueError, match="together"):
        judge("570.124.04", arch_list=["sm_90"])
    with pytest.raises(ValueError, match="driver version"):
        judge("bogus")
