"""Every parser on every recorded fixture it is meant for (expected values from the README)."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_fixtures import FIXTURES, read_fixture, recorded_command

from gpurig.data.tables import table
from gpurig.read import gpu_parse
from gpurig.read.gpu_parse import (
    parse_ecc_uncorrectable,
    parse_proc_driver_version,
    parse_query_gpu_csv,
    parse_smi_header,
    parse_smi_version,
    parse_throttle_reasons,
    parse_xid_lines,
)
from tests.unit import forged_kernel_log as forged


def test_fixture_helper_strips_only_the_header() -> None:
    raw = (FIXTURES / "torch_arch_list_docker_cu11x.txt").read_text()
    assert raw.startswith("# source: ")
    assert read_fixture("torch_arch_list_docker_cu11x.txt").startswith("['sm_37'")


@pytest.mark.parametrize(
    ("name", "version", "is_open"),
    [
        ("proc_driver_nvidia_version_384.98_proprietary.txt", "384.98", False),
        ("proc_driver_nvidia_version_525.60.11_open_archlinux-no-date.txt", "525.60.11", True),
    ],
)
def test_proc_driver_version(name: str, version: str, is_open: bool) -> None:
    assert parse_proc_driver_version(read_fixture(name)) == gpu_parse.KernelModule(version, is_open)


def test_proc_driver_version_rejects_other_text() -> None:
    with pytest.raises(ValueError, match="NVRM version"):
        parse_proc_driver_version(read_fixture("nvidia-smi_version_590.48.01.txt"))


H100_VM_QUERY = "nvidia-smi_query-gpu_csv-noheader_h100_580.159.04_health-fields.txt"


def test_the_gpu_query_is_the_recorded_one() -> None:
    """The query runs as recorded on the H100 80GB VM (driver 580.159.04): the same fields,
    noheader and nounits."""
    assert recorded_command(H100_VM_QUERY) == gpu_parse.QUERY_GPU_COMMAND


def test_the_gpu_query_read_by_position_on_its_recording() -> None:
    """Read by position, the query's own recording gives what the same machine's run with a
    header gives by name (power.draw moved between the two runs)."""
    (gpu,) = parse_query_gpu_csv(read_fixture(H100_VM_QUERY))
    assert (gpu["name"], gpu["serial"], gpu["driver_version"], gpu["compute_cap"]) == (
        "NVIDIA H100 80GB HBM3", "1652724064200", "580.159.04", "9.0"
    )  # fmt: skip
    assert (gpu["memory.used"], gpu["memory.total"], gpu["mig.mode.current"]) == (
        "0", "81559", "Disabled"
    )  # fmt: skip
    (named,) = parse_query_gpu_csv(
        read_fixture("nvidia-smi_query-gpu_csv_h100_580.159.04_health-fields.txt")
    )
    assert {k: v for k, v in gpu.items() if k != "power.draw"} == {
        k: v for k, v in named.items() if k != "power.draw"
    }
    assert (gpu["power.draw"], named["power.draw"]) == ("108.34", "109.38")


def test_query_gpu_h100_mig_with_header_and_units() -> None:
    (gpu,) = parse_query_gpu_csv(read_fixture("nvidia-smi_query-gpu_csv_h100-mig_590.48.01.txt"))
    assert gpu["name"] == "NVIDIA H100 80GB HBM3"
    assert gpu["driver_version"] == "590.48.01"
    assert gpu["compute_cap"] == "9.0"
    assert gpu["memory.total"] == "81559"
    assert gpu["memory.used"] == "11125"
    assert gpu["mig.mode.current"] == "Enabled"
    assert gpu["pci.bus_id"] == "00000000:00:09.0"
    assert gpu["vgpu_driver_capability.heterogenous_multivGPU"] is None


def test_query_gpu_l40s() -> None:
    (gpu,) = parse_query_gpu_csv(read_fixture("nvidia-smi_query-gpu_csv_l40s_595.80.txt"))
    assert (gpu["name"], gpu["driver_version"], gpu["kmd_version"]) == (
        "NVIDIA L40S",
        "595.80",
        "595.80",
    )
    assert (gpu["compute_cap"], gpu["memory.total"], gpu["mig.mode.current"]) == (
        "8.9",
        "46068",
        None,
    )


def test_query_gpu_compute_cap_only_with_and_without_header() -> None:
    text = read_fixture("nvidia-smi_query-gpu_csv_compute_cap_only_570.133.07.txt")
    assert parse_query_gpu_csv(text) == [{"compute_cap": "8.9"}]
    # --format=csv,noheader prints the same rows without the header line.
    rows = text.splitlines()[1:]
    assert parse_query_gpu_csv("\n".join(rows), fields=("compute_cap",)) == [{"compute_cap": "8.9"}]


def test_query_gpu_refused_field_raises() -> None:
    text = read_fixture("nvidia-smi_query-gpu_error_compute_cap-not-valid.txt")
    with pytest.raises(ValueError, match="not a valid field"):
        parse_query_gpu_csv(text)


def test_query_gpu_column_count_mismatch_raises() -> None:
    text = read_fixture("nvidia-smi_query-gpu_csv_compute_cap_only_570.133.07.txt")
    with pytest.raises(ValueError, match="columns"):
        parse_query_gpu_csv(text.splitlines()[1], fields=("index", "compute_cap"))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia-smi_version_590.48.01.txt", ("590.48.01", "590.48", "590.48.01", "13.1")),
        ("nvidia-smi_version_610.57.04.txt", ("610.57.04", "610.57", "610.57.04", "13.3")),
    ],
)
def test_smi_version(name: str, expected: tuple[str, str, str, str]) -> None:
    v = parse_smi_version(read_fixture(name))
    assert (v.smi, v.nvml, v.driver, v.cuda) == expected


def test_smi_version_rejects_other_text() -> None:
    with pytest.raises(ValueError, match="lacks"):
        parse_smi_version(read_fixture("nvidia-smi_h100x8_550.90.07.txt"))


@pytest.mark.parametrize(
    ("name", "driver", "cuda"),
    [
        ("nvidia-smi_a100-sxm4-40gb_550.144.03.txt", "550.144.03", "12.4"),
        ("nvidia-smi_a100-sxm4-40gbx8_450.102.04_no-nvidia-prefix.txt", "450.102.04", "11.0"),
        ("nvidia-smi_geforce-truncated-name_errfan_525.125.06.txt", "525.125.06", "12.0"),
        ("nvidia-smi_h100-80gb-mig_load_590.48.01.txt", "590.48.01", "13.1"),
        ("nvidia-smi_h100-nvl_575.51.03_exclusive-process.txt", "575.51.03", "12.9"),
        ("nvidia-smi_h100x8_550.90.07.txt", "550.90.07", "12.4"),
        ("nvidia-smi_h200x8_570.133.20.txt", "570.133.20", "12.8"),
        ("nvidia-smi_l40s_580.126.09_one-process.txt", "580.126.09", "13.0"),
        ("nvidia-smi_rtx2080super_610.57.04_kmd-header.txt", "610.57.04", "13.3"),
        ("nvidia-smi_rtx2080tix6_590.48.01_power-over-cap.txt", "590.48.01", "13.1"),
        ("nvidia-smi_rtx4080super_load_595.71.05.txt", "595.71.05", "13.2"),
        ("nvidia-smi_rtx5090+rtx4090_580.82.09_PARTIAL.txt", "580.82.09", "13.0"),
        ("nvidia-smi_windows-wddm_rtx2080super_610.62.txt", "610.62", "13.3"),
    ],
)
def test_smi_table_header(name: str, driver: str, cuda: str) -> None:
    header = parse_smi_header(read_fixture(name))
    assert (header.smi, header.driver, header.cuda) == (driver, driver, cuda)


def test_smi_table_header_rejects_other_text() -> None:
    with pytest.raises(ValueError, match="banner"):
        parse_smi_header(read_fixture("driver_mismatch_nvml-570.124.txt"))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia-smi-q-x_quadro-p2000_525.125.06_throttle.xml", {"00000000:17:00.0": ["gpu_idle"]}),
        ("nvidia-smi-q-x_rtx3060_570.124.04.xml", {"00000000:2D:00.0": ["gpu_idle"]}),
        ("nvidia-smi-q-x_tesla-t4_515.105.01_reindented.xml", {"00000000:00:1E.0": []}),
    ],
)
def test_throttle_reasons_both_schemas(name: str, expected: dict[str, list[str]]) -> None:
    assert parse_throttle_reasons(read_fixture(name)) == expected


def test_throttle_reasons_v13_ignores_counters() -> None:
    reasons = parse_throttle_reasons(read_fixture("nvidia-smi-q-x_rtx4000-sff-ada_595.84_v13.xml"))
    assert list(reasons.values()) == [["gpu_idle"]]


@pytest.mark.parametrize(
    ("name", "count", "first"),
    [
        (
            "kernel_xid_119_gsp_rpc_timeout.txt",
            5,
            (119, "0000:9b:00", "pid=2024380, name=nvidia-smi, Timeout after 6s"),
        ),
        (
            "kernel_xid_13_43_dmesg-decode-iso_excerpt.txt",
            30,
            (13, "0000:38:00", "pid='<unknown>', name=<unknown>, Graphics SM Warp Exception"),
        ),
        (
            "kernel_xid_45_after_xid_149_145_590.48.01.txt",
            7,
            (45, "0000:dc:00", "pid=1818990, name=python3, Ch 00000001 caused by previous Xid 149"),
        ),
        (
            "kernel_xid_48_63_94_dbe_rowremap_dmesg-iso.txt",
            11,
            (48, "0000:19:00", "pid='<unknown>', name=<unknown>, An uncorrectable double bit"),
        ),
    ],
)
def test_xid_lines(name: str, count: int, first: tuple[int, str, str]) -> None:
    events = parse_xid_lines(read_fixture(name))
    assert len(events) == count
    assert (events[0].xid, events[0].pci) == first[:2]
    assert events[0].message.startswith(first[2])


def test_xid_counts_per_code() -> None:
    events = parse_xid_lines(read_fixture("kernel_xid_48_63_94_dbe_rowremap_dmesg-iso.txt"))
    assert [e.xid for e in events] == [48, 63] + [94] * 9
    burst = parse_xid_lines(read_fixture("kernel_xid_13_43_dmesg-decode-iso_excerpt.txt"))
    assert sum(e.xid == 43 for e in burst) == 2


def test_torch_arch_list() -> None:
    text = read_fixture("torch_arch_list_docker_cu11x.txt")
    assert gpu_parse.parse_torch_arch_list(text) == [
        "sm_37", "sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86",
    ]  # fmt: skip
    with pytest.raises(ValueError, match="arch list"):
        gpu_parse.parse_torch_arch_list(read_fixture("nvidia-smi_version_590.48.01.txt"))


@pytest.mark.parametrize(
    ("name", "supported"),
    [
        (
            "torch_warning_rtx5090_sm120_journald-prefixed.txt",
            ["sm_50", "sm_60", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        ),
        (
            "torch_warning_rtx5090_sm120_windows.txt",
            ["sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        ),
    ],
)
def test_torch_capability_warning(name: str, supported: list[str]) -> None:
    warning = gpu_parse.parse_torch_capability_warning(read_fixture(name))
    assert warning == gpu_parse.TorchCapabilityWarning(
        "NVIDIA GeForce RTX 5090", "sm_120", supported
    )


def test_torch_messages_absent() -> None:
    text = read_fixture("torch_arch_list_docker_cu11x.txt")
    assert gpu_parse.parse_torch_capability_warning(text) is None
    assert not gpu_parse.has_no_kernel_image_error(text)
    assert gpu_parse.parse_nvml_mismatch(text) is None


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia-smi-q-x_tesla-t4_515.105.01_reindented.xml", {"00000000:00:1E.0": 0}),
        ("nvidia-smi-q-x_quadro-p2000_525.125.06_throttle.xml", {"00000000:17:00.0": None}),
        ("nvidia-smi-q-x_rtx4000-sff-ada_595.84_v13.xml", {"00000000:06:00.0": None}),
    ],
)
def test_ecc_uncorrectable_counts_or_none_without_ecc(
    name: str, expected: dict[str, int | None]
) -> None:
    assert parse_ecc_uncorrectable(read_fixture(name)) == expected


# --- health fields, NVLink, kernel events, container CLI, Jetson, torch wordings -------------


@pytest.mark.parametrize(
    ("xml", "text"),
    [
        ("nvidia-smi-q-x_h100_580.159.04_vm.xml", "nvidia-smi-q_h100_580.159.04_vm.txt"),
    ],
)
def test_health_xml_and_text_agree_on_the_same_machine(xml: str, text: str) -> None:
    assert gpu_parse.parse_health_xml(read_fixture(xml)) == gpu_parse.parse_health_text(
        read_fixture(text)
    )


def test_health_h100_lent_machine() -> None:
    (h,) = gpu_parse.parse_health_xml(read_fixture("nvidia-smi-q-x_h100_580.159.04_vm.xml"))
    assert (h.pci, h.serial, h.uuid) == (
        "00000000:00:06.0",
        "1652724064200",
        "GPU-e547dfd8-4d29-222b-a7f7-9e8719a4fb76",
    )
    assert (h.pcie_gen_current, h.pcie_gen_max, h.pcie_width_current, h.pcie_width_max) == (
        5,
        5,
        16,
        16,
    )
    assert (h.persistence, h.ecc_current, h.mig_current, h.recovery_action) == (
        True,
        "Enabled",
        "Disabled",
        "None",
    )
    assert (h.remap_pending, h.remap_failure, h.retired_pending) == (False, False, None)
    assert (h.temp_c, h.temp_slowdown_c, h.tlimit_margin_c, h.power_limit_w) == (
        34,
        None,
        53,
        700.0,
    )


@pytest.mark.parametrize(
    ("name", "count", "field", "value"),
    [
        ("nvidia-smi-q_a10_535.129.03.txt", 1, "remap_pending", True),
        ("nvidia-smi-q_h100x8_535.161.08.txt", 8, "fabric_state", "Completed"),
        ("nvidia-smi-q_rtx4090_537.13_windows-wddm.txt", 1, "pcie_width_current", 8),
        ("nvidia-smi-q_titan-v_560.35.03.txt", 1, "temp_slowdown_c", 97),
        ("nvidia-smi-q_rtx2080super_610.57.04_kmd.txt", 1, "pcie_gen_current", 1),
        ("nvidia-smi-q_h200_590.48.01.txt", 1, "recovery_action", "None"),
    ],
)
def test_health_text_across_drivers(name: str, count: int, field: str, value: object) -> None:
    gpus = gpu_parse.parse_health_text(read_fixture(name))
    assert len(gpus) == count
    assert getattr(gpus[0], field) == value


def test_health_xml_older_schemas() -> None:
    (t4,) = gpu_parse.parse_health_xml(
        read_fixture("nvidia-smi-q-x_tesla-t4_515.105.01_reindented.xml")
    )
    assert (t4.persistence, t4.retired_pending, t4.remap_pending, t4.pcie_width_current) == (
        False,
        False,
        None,
        8,
    )


def test_health_text_refuses_other_text() -> None:
    with pytest.raises(ValueError, match="GPU 00000000"):
        gpu_parse.parse_health_text(read_fixture("nvidia-smi--version_h100_580.159.04_vm.txt"))


def test_nvlink_status() -> None:
    (gpu,) = gpu_parse.parse_nvlink_status(
        read_fixture("nvidia-smi_nvlink-s_v100-sxm2_inactive_PARTIAL.txt")
    )
    assert (gpu.index, gpu.name, gpu.links, gpu.inactive) == (3, "Tesla V100-SXM2-32GB", 6, [3, 5])
    up = gpu_parse.parse_nvlink_status(
        read_fixture("nvidia-smi_nvlink-s_a100-sxm4-80gbx8_all-up.txt")
    )
    assert [(g.links, g.inactive) for g in up] == [(12, [])] * 8
    assert (
        gpu_parse.parse_nvlink_status(
            read_fixture("nvidia-smi_nvlink-s_h100-single_580.159.04_vm.txt")
        )
        == []
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("kernel_fallen-off-bus_no-xid_570.158.01_dmesg.txt", ["0000:b3:00.0"]),
        ("kernel_xid_79_fallen-off-bus_rtx5080_journald.txt", ["0000:2b:00.0"]),
        ("kernel_fallen-off-bus_legacy-gpu-at_journald.txt", ["0000:01:00.0"]),
        ("kernel_xid_3_legacy-no-pci-prefix_journald.txt", ["0000:01:00.0"]),
        ("kernel_nvrm_boot_h100_580.159.04_vm.txt", []),
        ("kernel_xid_119_gsp_rpc_timeout.txt", []),
    ],
)
def test_fallen_off_bus_with_and_without_xid(name: str, expected: list[str]) -> None:
    assert [e.pci for e in gpu_parse.parse_fallen_off_bus(read_fixture(name))] == expected


def test_legacy_xid_layout_without_pci_prefix() -> None:
    (event,) = parse_xid_lines(read_fixture("kernel_xid_3_legacy-no-pci-prefix_journald.txt"))
    assert (event.xid, event.pci) == (3, "0000:01:00")


def test_an_xid_in_another_message_is_no_event() -> None:
    """Text an account wrote (a crashing program's file name in the segfault line, a command
    name in an audit record) is not the driver's: an event is a message that starts so."""
    assert parse_xid_lines(forged.REAL_SEGFAULT) == []
    assert gpu_parse.parse_fallen_off_bus(forged.REAL_SEGFAULT) == []
    assert parse_xid_lines(forged.FORGED) == []
    assert gpu_parse.parse_fallen_off_bus(forged.FORGED) == []


@pytest.mark.parametrize("prefix", forged.PREFIXES)
def test_the_drivers_own_messages_are_events_in_every_prefix(prefix: str) -> None:
    text = "".join(f"{prefix}{m}\n" for m in forged.MESSAGES)
    (event,) = parse_xid_lines(text)
    assert (event.xid, event.pci, event.message) == (
        79,
        "0000:3b:00",
        "pid=1, GPU has fallen off the bus.",
    )
    assert [(e.pci, e.line) for e in gpu_parse.parse_fallen_off_bus(text)] == [
        ("0000:3b:00.0", forged.FALLEN), ("0000:3b:00.0", forged.FALLEN_AT),
    ]  # fmt: skip
    if prefix == "[ 8123.456789] ":
        assert event.at == 8123.456789


@pytest.mark.parametrize(
    "name",
    [
        "kernel_xid_119_gsp_rpc_timeout.txt",
        "kernel_xid_13_43_dmesg-decode-iso_excerpt.txt",
        "kernel_xid_45_after_xid_149_145_590.48.01.txt",
        "kernel_xid_48_63_94_dbe_rowremap_dmesg-iso.txt",
        "kernel_xid_3_legacy-no-pci-prefix_journald.txt",
        "kernel_sxid_20034_with_xid_79_dmesg.txt",
        "kernel_fallen-off-bus_no-xid_570.158.01_dmesg.txt",
        "kernel_xid_79_fallen-off-bus_rtx5080_journald.txt",
        "kernel_fallen-off-bus_legacy-gpu-at_journald.txt",
    ],
)
def test_recorded_events_are_found_among_forged_ones(name: str) -> None:
    text = read_fixture(name)
    mixed = forged.FORGED + text + forged.FORGED
    assert parse_xid_lines(mixed) == parse_xid_lines(text)
    assert gpu_parse.parse_fallen_off_bus(mixed) == gpu_parse.parse_fallen_off_bus(text)
    real = [line for line in text.splitlines() if "NVRM: Xid (" in line]
    assert len(parse_xid_lines(text)) == len(real)


def test_kernel_message_is_the_line_after_its_prefixes() -> None:
    for prefix in forged.PREFIXES:
        assert gpu_parse.kernel_message(f"{prefix}{forged.XID}") == forged.XID, prefix
    assert gpu_parse.kernel_message(forged.REAL_SEGFAULT).startswith("python3[785]: segfault at 0")
    # a continuation line keeps its indent: it is no message's start
    assert gpu_parse.kernel_message("               NVRM: fallen off the bus") == (
        "               NVRM: fallen off the bus"
    )
    assert gpu_parse.kernel_message("[ 1.0] [drm] x") == "[drm] x"


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("driver_mismatch_nvml-570.124.txt", "570.124"),
        ("driver_mismatch_nvml-550.144.txt", "550.144"),
        ("driver_mismatch_nvml_no-library-line.txt", ""),
        ("nvidia-smi_h100_580.159.04_vm.txt", None),
    ],
)
def test_nvml_mismatch_with_and_without_library_line(name: str, expected: str | None) -> None:
    assert gpu_parse.parse_nvml_mismatch(read_fixture(name)) == expected


@pytest.mark.parametrize(
    ("name", "version", "l4t"),
    [
        ("proc_driver_nvidia_version_jetson-orin-nx_l4t-35.3.1.txt", "35.3.1", True),
        ("proc_driver_nvidia_version_580.159.04_open_nixbld.txt", "580.159.04", False),
        ("proc_driver_nvidia_version_565.57.01_open_ubuntu.txt", "565.57.01", False),
    ],
)
def test_proc_version_open_and_jetson(name: str, version: str, l4t: bool) -> None:
    text = read_fixture(name)
    module = parse_proc_driver_version(text)
    assert (module.version, module.open) == (version, True)
    assert gpu_parse.is_l4t_module(module, text) is l4t


# Each wording torch has printed (gpurig/data/torch_warnings.yaml), by its recorded case: what
# the text states about the GPU and the build, whichever words state it.
TORCH_WORDINGS = {
    "too_old": ("GeForce GT 630M", "sm_21", [], None),
    "too_old_minimum_3.5": ("GeForce GTX 660 Ti", "sm_30", [], ("sm_35", None)),
    "too_old_minimum_of_build": ("GeForce GT 720", "sm_35", [], ("sm_37", None)),
    "not_compatible_sm_list": (
        "NVIDIA GeForce RTX 5090",
        "sm_120",
        ["sm_50", "sm_60", "sm_61", "sm_70", "sm_75", "sm_80", "sm_86", "sm_90"],
        None,
    ),
    # The recorded case's range holds the GPU's own 8.9: not a no-kernels warning (None below);
    # the wording read on the case's text with another GPU's capability, 8.6, outside it.
    "minimum_and_maximum": ("NVIDIA RTX 6000 Ada Generation", "sm_86", [], ("sm_89", "sm_90")),
    "compute_capability_cc_list": (
        "Tesla V100-PCIE-32GB",
        "sm_70",
        ["sm_75", "sm_80", "sm_86", "sm_90", "sm_100", "sm_120"],
        None,
    ),
    "no_kernels_for_this_gpu": ("NVIDIA GB10", "sm_121", [], None),
}


def test_every_torch_wording_has_its_case() -> None:
    assert [w["id"] for w in table("torch_warnings.yaml")["wordings"]] == list(TORCH_WORDINGS)


@pytest.mark.parametrize("wording", table("torch_warnings.yaml")["wordings"], ids=lambda w: w["id"])
def test_torch_capability_warning_by_meaning(wording: dict[str, str]) -> None:
    gpu, capability, supported, supported_range = TORCH_WORDINGS[wording["id"]]
    text = read_fixture(wording["case"])
    if wording["id"] == "minimum_and_maximum":
        assert gpu_parse.parse_torch_capability_warning(text) is None  # 8.9 in (8.9) - (9.0)
        text = text.replace("cuda capability 8.9.", "cuda capability 8.6.")
    warning = gpu_parse.parse_torch_capability_warning(text)
    assert warning == gpu_parse.TorchCapabilityWarning(gpu, capability, supported, supported_range)


@pytest.mark.parametrize(
    ("capability", "no_kernels"),
    [("8.6", True), ("8.9", False), ("9.0", False), ("10.0", True), ("12.0", True)],
)
def test_a_range_holding_the_gpus_capability_is_no_no_kernels_warning(
    capability: str, no_kernels: bool
) -> None:
    """The source build's (8.9) - (9.0), judged numerically (10.0 is above 9.0, not below)."""
    text = read_fixture("torch_warning_cc-range_rtx6000ada_source-build.txt").replace(
        "cuda capability 8.9.", f"cuda capability {capability}."
    )
    warning = gpu_parse.parse_torch_capability_warning(text)
    assert (warning is not None) == no_kernels


def test_no_kernels_in_cudas_words_and_torchs() -> None:
    for case in (
        "torch_error_no-kernel-image_rtx5090_journald-prefixed.txt",
        "torch_warning_no-kernels_gb10_2.13.0.txt",
    ):
        assert gpu_parse.has_no_kernel_image_error(read_fixture(case))
    assert not gpu_parse.has_no_kernel_image_error(
        read_fixture("torch_warning_cc-range_rtx6000ada_source-build.txt")
    )


def test_compute_apps_rows_and_refusals() -> None:
    """`--query-compute-apps` rows typed; nvidia-smi's own failure is None (it could not say);
    anything else is refused. No host was recorded running this query with a process on it
    (the H100 80GB VM, driver 580.159.04, ran none): the rows are the cells of the same fields
    that the exporter's loaded H100 capture recorded (with a header and units), as
    noheader,nounits prints them."""
    recorded = parse_query_gpu_csv(
        read_fixture("nvidia-smi_query-compute-apps_csv_h100-mig_load_590.48.01.txt")
    )
    rows = "".join(f"{a['gpu_uuid']}, {a['pid']}, {a['used_gpu_memory']}\n" for a in recorded)
    assert gpu_parse.parse_compute_apps(rows) == [
        {"gpu_uuid": "GPU-00000000-0000-0000-0000-000000000000", "pid": pid, "used_mib": mib}
        for pid, mib in ((21180, 2296), (21181, 1272), (21198, 7484))
    ]
    assert gpu_parse.parse_compute_apps("") == []
    assert gpu_parse.parse_compute_apps(read_fixture("driver_mismatch_nvml-570.124.txt")) is None
    with pytest.raises(ValueError, match="compute-apps row"):
        gpu_parse.parse_compute_apps("No running processes found")


def test_smi_version_h100_vm_capitalised_driver_label() -> None:
    v = parse_smi_version(read_fixture("nvidia-smi--version_h100_580.159.04_vm.txt"))
    assert (v.smi, v.nvml, v.driver, v.cuda) == ("580.159.04", "580.159", "580.159.04", "13.0")


# --- nvidia-smi -L and MIG mode ----------------------------------------------------------------


def _listed(name: str) -> list[tuple[int, str, list[str]]]:
    """(index, name, [profile of each MIG device]) per GPU of a recorded listing."""
    return [
        (g.index, g.name, [d.profile for d in g.mig])
        for g in gpu_parse.parse_smi_list(read_fixture(name))
    ]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("nvidia-smi-L_h100_580.159.04_vm.txt", [(0, "NVIDIA H100 80GB HBM3", [])]),
        ("nvidia-smi-L_titan-v_rtx5880ada_no-mig_570.86.15.txt",
         [(0, "NVIDIA TITAN V", []), (1, "NVIDIA RTX 5880 Ada Generation", [])]),
        ("nvidia-smi-L_h100-80gb-mig_590.48.01.txt",
         [(0, "NVIDIA H100 80GB HBM3", ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"])]),
        ("nvidia-smi-L_h200-mig_590.48.01.txt",
         [(0, "NVIDIA H200", ["1c.3g.71gb", "2c.3g.71gb", "2g.35gb", "1g.18gb", "1g.18gb"])]),
        ("nvidia-smi-L_a100-sxm4-80gb-x4_mig-on-gpu0_535.54.03.txt",
         [(0, "NVIDIA A100-SXM4-80GB", ["1g.20gb"] * 4), (1, "NVIDIA A100-SXM4-80GB", []),
          (2, "NVIDIA A100-SXM4-80GB", []), (3, "NVIDIA A100-SXM4-80GB", [])]),
        ("nvidia-smi-L_a100-80gb-pcie_2x3g.40gb_530.30.02.txt",
         [(0, "NVIDIA A100 80GB PCIe", ["3g.40gb", "3g.40gb"])]),
        ("nvidia-smi-L_a100-sxm4-80gb_7x1g.10gb_535.216.01.txt",
         [(0, "NVIDIA A100-SXM4-80GB", ["1g.10gb"] * 7)]),
        ("nvidia-smi-L_a100-pcie-40gb_mig-legacy-uuid_460.80.txt",
         [(0, "A100-PCIE-40GB", ["4g.20gb", "2g.10gb", "1g.5gb"])]),
    ],
)  # fmt: skip
def test_smi_list_gpus_and_their_mig_devices(
    name: str, expected: list[tuple[int, str, list[str]]]
) -> None:
    assert _listed(name) == expected


def test_smi_list_keeps_uuids_of_both_generations() -> None:
    (new,) = gpu_parse.parse_smi_list(
        read_fixture("nvidia-smi-L_a100-80gb-pcie_2x3g.40gb_530.30.02.txt")
    )
    assert new.uuid == "GPU-932bfb2c-849a-2a22-1e84-9eff6bc02b39"
    assert new.mig[1] == gpu_parse.MigDevice(
        1, "3g.40gb", "MIG-3adbed3a-d03d-549f-a016-ba1fd7359f23"
    )
    (old,) = gpu_parse.parse_smi_list(
        read_fixture("nvidia-smi-L_a100-pcie-40gb_mig-legacy-uuid_460.80.txt")
    )
    assert [d.uuid for d in old.mig] == [
        f"MIG-{old.uuid}/{gi}/0" for gi in (2, 3, 9)
    ]  # 450/460 drivers: MIG-GPU-<parent>/<GPU instance>/<compute instance>


def test_smi_list_refuses_what_is_not_a_listing() -> None:
    # `nvidia-smi -L` fails with the same lines as plain nvidia-smi when NVML cannot start.
    with pytest.raises(ValueError, match="Failed to initialize NVML"):
        gpu_parse.parse_smi_list(read_fixture("driver_mismatch_nvml-570.124.txt"))
    with pytest.raises(ValueError, match="not a GPU or MIG device line"):
        gpu_parse.parse_smi_list(read_fixture("nvidia-smi_version_590.48.01.txt"))


def test_smi_list_refuses_a_mig_device_without_its_gpu() -> None:
    lines = read_fixture("nvidia-smi-L_h100-80gb-mig_590.48.01.txt").splitlines()
    with pytest.raises(ValueError, match=r"MIG 3g\.40gb"):
        gpu_parse.parse_smi_list("\n".join(lines[1:]))


def test_smi_list_refuses_an_old_style_mig_uuid_under_another_gpu() -> None:
    # The legacy listing's MIG lines moved under another recorded A100's GPU line.
    other = read_fixture("nvidia-smi-L_a100-80gb-pcie_2x3g.40gb_530.30.02.txt").splitlines()[0]
    legacy = read_fixture("nvidia-smi-L_a100-pcie-40gb_mig-legacy-uuid_460.80.txt").splitlines()
    with pytest.raises(ValueError, match="MIG-GPU-9de3d0e8"):
        gpu_parse.parse_smi_list("\n".join([other, *legacy[1:]]))


@pytest.mark.parametrize(
    ("name", "parse"),
    [
        ("nvidia-smi-q-x_a100-sxm4-80gb_mig-on_535.54.03.xml", gpu_parse.parse_health_xml),
        ("nvidia-smi-q_h100-80gb-mig_590.48.01.txt", gpu_parse.parse_health_text),
    ],
)
def test_mig_mode_current_and_pending_on_mig_enabled_gpus(name: str, parse: Any) -> None:
    """The MIG Device blocks under a MIG GPU do not disturb its own fields."""
    (gpu,) = parse(read_fixture(name))
    assert (gpu.mig_current, gpu.mig_pending) == ("Enabled", "Enabled")
    assert gpu.name in {"NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3"}
    assert gpu.ecc_current == "Enabled" and gpu.pcie_width_max == 16
