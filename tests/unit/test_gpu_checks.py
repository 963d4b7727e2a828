"""gpu_checks on recorded outputs: an H100 80GB VM (driver 580.159.04, healthy) and real
failures from issue threads."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from gpurig.checks import gpu as gpu_checks
from gpurig.checks.rules import rules
from gpurig.facts.gpurig_nvidia import GpuHealth, NvidiaGpus
from gpurig.read import gpu_parse
from gpurig.spec.tuples import asdict
from tests.unit.fact_values import gpu_values, h100_vm, reader
from tests.unit.gpu_fixtures import read_fixture

Values = dict[type, Any]


def with_text_health(name: str, **raw: Any) -> Values:
    """The H100 VM's facts with health fields from another recorded `nvidia-smi -q` text."""
    gpu = h100_vm(**raw)
    gpu[GpuHealth]["health"] = [asdict(h) for h in gpu_parse.parse_health_text(read_fixture(name))]
    return gpu


def check(spec: dict[str, Any], values: Values) -> list[Any]:
    return gpu_checks.check(spec, reader(values))


def ids(findings: list[Any]) -> list[str]:
    return [f.id for f in findings]


H100_SPEC = {"gpu_expect": {"count": 1, "model": "H100 80GB", "mig": "disabled"}}


def test_h100_vm_is_healthy_and_as_declared() -> None:
    assert check(H100_SPEC, h100_vm()) == []


def test_count_and_model_name_the_gpus_found() -> None:
    spec = {"gpu_expect": {"count": 8, "model": "A100", "mig": "enabled"}}
    findings = {f.id: f for f in check(spec, h100_vm())}
    assert set(findings) == {"gpu.count", "gpu.model", "gpu.mig_mode"}
    assert findings["gpu.count"].actual == "1: NVIDIA H100 80GB HBM3"
    assert "GPU-e547dfd8-4d29-222b-a7f7-9e8719a4fb76" in findings["gpu.model"].actual
    assert "serial 1652724064200" in findings["gpu.mig_mode"].actual
    assert {f.remediation for f in findings.values()} == {"contact-provider"}


def test_one_gpu_is_said_as_one() -> None:
    """The H100 VM has one GPU: the messages that count GPUs (or an Xid's lines) say one."""
    found = {f.id: f for f in check(expect(count=8, model="A100"), h100_vm())}
    assert found["gpu.count"].message == "the host has 1 GPU, 8 were declared"
    assert found["gpu.count"].expected == "8 GPUs"
    [one] = [f for f in check(expect(count=2), h100_vm()) if f.id == "gpu.count"]
    assert one.message == "the host has 1 GPU, 2 were declared"
    two = h100_vm()
    two[NvidiaGpus]["gpus"] *= 2
    [declared] = [f for f in check(expect(count=1), two) if f.id == "gpu.count"]
    assert (declared.message, declared.expected) == ("the host has 2 GPUs, 1 was declared", "1 GPU")
    assert found["gpu.model"].message == "1 GPU is not the declared model"
    [unexpected] = [f for f in check({"gpu": "absent"}, h100_vm()) if f.id == "gpu.unexpected"]
    assert unexpected.actual == "1 GPU"
    pending = [f for f in check({}, _set_health(retired_pending=True)) if f.id.endswith("pending")]
    assert pending[0].message == "1 GPU: memory pages wait to be retired"
    log = read_fixture("kernel_xid_119_gsp_rpc_timeout.txt").splitlines()
    one = "\n".join(log[: next(i for i, line in enumerate(log) if "Xid" in line) + 1])
    [xid] = [f for f in check({}, h100_vm(xid_lines=one)) if f.id == "gpu.xid"]
    assert xid.message == "Xid 119 (GSP_RPC_TIMEOUT) logged 1 time since boot"


def test_every_finding_has_a_remediation_from_the_table() -> None:
    allowed = set(rules()["remediations"])
    for check_id in gpu_checks.IDS:
        assert rules()["checks"][check_id]["remediation"] in allowed, check_id
        assert rules()["checks"][check_id]["source"], check_id
    assert set(rules()["xid_buckets"].values()) <= allowed


def test_row_remap_pending_on_recorded_a10() -> None:
    gpu = with_text_health("nvidia-smi-q_a10_535.129.03.txt")
    (finding,) = [f for f in check({}, gpu) if f.id == "gpu.row_remap_pending"]
    assert (finding.severity, finding.remediation) == ("error", "reset-gpu")
    assert "serial 1324521052681" in finding.actual
    assert "uncorrectable rows 4" in finding.actual


def test_pcie_width_below_max_is_flagged_but_idle_gen_drop_is_not() -> None:
    x8 = with_text_health("nvidia-smi-q_rtx4090_537.13_windows-wddm.txt")
    (finding,) = [f for f in check({}, x8) if f.id == "gpu.pcie_link"]
    assert finding.actual.endswith("gen 4 x8 in P0")
    idle = with_text_health("nvidia-smi-q_titan-v_560.35.03.txt")  # gen 1 of 3 at P8
    assert "gpu.pcie_link" not in ids(check({}, idle))


def test_persistence_off_on_recorded_t4() -> None:
    gpu = h100_vm(smi_xml="nvidia-smi-q-x_tesla-t4_515.105.01_reindented.xml")
    assert {"gpu.persistence", "gpu.pcie_link"} <= set(ids(check({}, gpu)))


def test_nvlink_links_down() -> None:
    down = h100_vm(nvlink="nvidia-smi_nvlink-s_v100-sxm2_inactive_PARTIAL.txt")
    (finding,) = [f for f in check({}, down) if f.id == "gpu.nvlink_down"]
    assert "links 3, 5" in finding.actual and finding.remediation == "reset-gpu"
    up = h100_vm(nvlink="nvidia-smi_nvlink-s_a100-sxm4-80gbx8_all-up.txt")
    assert "gpu.nvlink_down" not in ids(check({}, up))


def test_fabric_manager_needed_on_nvswitch_hosts() -> None:
    done = with_text_health("nvidia-smi-q_h100x8_535.161.08.txt")  # Fabric State: Completed
    assert "gpu.fabric_manager" not in ids(check({}, done))
    stopped = with_text_health(
        "nvidia-smi-q_h100x8_535.161.08.txt", nvswitch_devices=4, fabricmanager="inactive"
    )
    (finding,) = [f for f in check({}, stopped) if f.id == "gpu.fabric_manager"]
    assert finding.actual.startswith("4 NVSwitch devices, nvidia-fabricmanager inactive")


@pytest.mark.parametrize(
    ("log", "pci"),
    [
        ("kernel_fallen-off-bus_no-xid_570.158.01_dmesg.txt", "GPU 0000:b3:00.0;"),
        ("kernel_xid_79_fallen-off-bus_rtx5080_journald.txt", "GPU 0000:2b:00.0;"),
        ("kernel_fallen-off-bus_legacy-gpu-at_journald.txt", "GPU 0000:01:00.0;"),
    ],
)
def test_fallen_off_the_bus_with_or_without_an_xid_is_one_finding(log: str, pci: str) -> None:
    findings = check({}, h100_vm(xid_lines=log))
    (finding,) = [f for f in findings if f.id == "gpu.fallen_off_bus"]
    assert (finding.severity, finding.remediation) == ("error", "reboot")
    assert finding.actual.startswith(pci) and "fallen off the bus" in finding.actual


def test_a_gpu_is_keyed_by_its_full_pci_address() -> None:
    """nvidia-smi prints an 8-hex PCI domain, the kernel log a 4-hex one (with or without the
    function); GH200 and GB200 boards put each GPU on bus 01 of its own domain. The addresses
    are as nvidia-smi prints them on those boards (tests/fixtures holds no kernel log from one)."""
    logged = ["PCI:0000:2b:00", "0000:2b:00.0", "00000000:2B:00.0"]
    assert {gpu_checks.pci_key(p) for p in logged} == {"00000000:2b:00"}
    assert gpu_checks.pci_key("PCI:0009:01:00") == gpu_checks.pci_key("00000009:01:00.0")
    boards = ["00000008:01:00.0", "00000009:01:00.0", "00000018:01:00.0", "00000019:01:00.0"]
    assert len({gpu_checks.pci_key(p) for p in boards}) == 4


@pytest.mark.parametrize(
    ("log", "expected"),
    [
        ("kernel_xid_119_gsp_rpc_timeout.txt", {(119, "error", "reset-gpu")}),
        (
            "kernel_xid_48_63_94_dbe_rowremap_dmesg-iso.txt",
            {(48, "error", "reset-gpu"), (63, "warn", "restart-job"), (94, "warn", "restart-job")},
        ),
        (
            "kernel_xid_13_43_dmesg-decode-iso_excerpt.txt",
            {(13, "warn", "restart-job"), (43, "warn", "restart-job")},
        ),
    ],
)
def test_xid_remediation_follows_the_catalog(log: str, expected: set[tuple[int, str, str]]) -> None:
    findings = [f for f in check({}, h100_vm(xid_lines=log)) if f.id == "gpu.xid"]
    got = {(int(f.message.split()[1]), f.severity, f.remediation) for f in findings}
    assert got == expected
    assert all("Xid (" in f.actual for f in findings)


def test_nvml_mismatch_without_the_library_line_is_still_a_finding() -> None:
    gpu = h100_vm(query="driver_mismatch_nvml_no-library-line.txt", smi_xml=None)
    (finding,) = check(H100_SPEC, gpu)
    assert (finding.id, finding.remediation) == ("gpu.nvml_mismatch", "reboot")
    assert finding.actual == "NVML library (version not printed), kernel module 580.159.04"
    versioned = h100_vm(query="driver_mismatch_nvml-550.144.txt", smi_xml=None)
    assert "NVML library 550.144" in check({}, versioned)[0].actual


def test_host_state_checks() -> None:
    pending = h100_vm(reboot_required=True, reboot_required_pkgs="linux-image-6.8.0-45\n")
    (finding,) = check({}, pending)
    assert (finding.id, finding.actual) == (
        "host.reboot_pending",
        "/var/run/reboot-required (linux-image-6.8.0-45)",
    )
    no_uvm = h100_vm(uvm_device=False)
    assert ids(check({}, no_uvm)) == ["gpu.uvm_missing"]
    unbuilt = h100_vm(proc_version=None, modinfo=True, module_built="", smi_xml=None)
    assert ids(check({}, unbuilt)) == ["gpu.module_missing"]
    # A container without modinfo cannot tell: no finding.
    assert check({}, h100_vm(proc_version=None, smi_xml=None)) == []


# --- MIG: mode, slices, and a slice judged by its parent GPU ----------------------------------

# One H100 with MIG on, recorded whole (utkuozdemir/nvidia_gpu_exporter captures): its query
# row, its `nvidia-smi -L` (3g.40gb + 2g.20gb + 2 x 1g.10gb) and its `nvidia-smi -q`. The query
# row is the exporter's (`--format=csv`, a header and units, other fields): no MIG host was
# recorded running gpurig's query, so this one is read by its header's names.
MIG_H100 = {
    "nvidia_smi": True,
    "query": "nvidia-smi_query-gpu_csv_h100-mig_590.48.01.txt",
    "listing": "nvidia-smi-L_h100-80gb-mig_590.48.01.txt",
    "compute_apps": "",
}
MIG_H100_Q = "nvidia-smi-q_h100-80gb-mig_590.48.01.txt"
AS_RECORDED = [
    {"profile": "3g.40gb", "count": 1},
    {"profile": "2g.20gb", "count": 1},
    {"profile": "1g.10gb", "count": 2},
]


def mig_h100(**raw: Any) -> Values:
    """The MIG H100's facts from its own recordings only (no H100-VM defaults)."""
    gpu = gpu_values(**{**MIG_H100, **raw})
    text = read_fixture(MIG_H100_Q)
    gpu[GpuHealth]["health"] = [asdict(h) for h in gpu_parse.parse_health_text(text)]
    return gpu


def expect(**keys: Any) -> dict[str, Any]:
    return {"gpu_expect": keys}


def test_mig_h100_as_declared_has_no_findings() -> None:
    spec = expect(count=1, model="H100 80GB", mig="enabled", mig_slices=AS_RECORDED)
    assert check(spec, mig_h100()) == []
    # The same slices declared in another order, or one profile split over two entries.
    split = [*AS_RECORDED[:2], {"profile": "1g.10gb", "count": 1}, AS_RECORDED[2] | {"count": 1}]
    assert check(expect(mig_slices=split[::-1]), mig_h100()) == []


def test_slices_that_differ_are_one_finding_naming_each_gpu() -> None:
    """The seed's SLURM job wants two 20 GB slices; this node has other ones."""
    spec = expect(mig_slices=[{"profile": "3g.20gb", "count": 2}])
    (finding,) = check(spec, mig_h100())
    assert (finding.id, finding.severity, finding.remediation) == (
        "gpu.mig_slices", "error", "contact-provider"
    )  # fmt: skip
    assert finding.expected == "2 x 3g.20gb"
    assert finding.actual == "GPU 0 NVIDIA H100 80GB HBM3: 2 x 1g.10gb + 1 x 2g.20gb + 1 x 3g.40gb"
    assert finding.message.startswith("the node has 4 MIG slices (")


@pytest.mark.parametrize(
    ("listing", "declared", "fires"),
    [
        # One A100 80GB PCIe split in two 3g.40gb (nvidia-container-toolkit#203).
        ("nvidia-smi-L_a100-80gb-pcie_2x3g.40gb_530.30.02.txt", {"3g.40gb": 2}, False),
        ("nvidia-smi-L_a100-80gb-pcie_2x3g.40gb_530.30.02.txt", {"3g.40gb": 3}, True),
        ("nvidia-smi-L_a100-80gb-pcie_2x3g.40gb_530.30.02.txt", {"3g.40gb": 2, "1g.10gb": 1}, True),
        # Four A100s, MIG on GPU 0 only: slices are counted over the node.
        ("nvidia-smi-L_a100-sxm4-80gb-x4_mig-on-gpu0_535.54.03.txt", {"1g.20gb": 4}, False),
        # 460-era names (MIG-GPU-<uuid>/<GI>/<CI>) count alike.
        ("nvidia-smi-L_a100-pcie-40gb_mig-legacy-uuid_460.80.txt",
         {"4g.20gb": 1, "2g.10gb": 1, "1g.5gb": 1}, False),
        # MIG off: no slices at all.
        ("nvidia-smi-L_h100_580.159.04_vm.txt", {"1g.10gb": 1}, True),
    ],
)  # fmt: skip
def test_slices_counted_by_profile_on_recorded_listings(
    listing: str, declared: dict[str, int], fires: bool
) -> None:
    wanted = [{"profile": p, "count": n} for p, n in declared.items()]
    found = ids(check(expect(mig_slices=wanted), h100_vm(listing=listing)))
    assert ("gpu.mig_slices" in found) is fires


def test_unreadable_listing_is_reported_not_guessed() -> None:
    spec = expect(mig_slices=[{"profile": "3g.20gb", "count": 2}])
    failed = mig_h100(listing="driver_mismatch_nvml-570.124.txt")
    (finding,) = check(spec, failed)
    assert finding.id == "gpu.mig_slices"
    assert finding.actual.startswith("unreadable: not a GPU or MIG device line")
    (silent,) = check(spec, mig_h100(listing=None))
    assert silent.actual == "unreadable: nvidia-smi -L printed nothing"
    # Without slices declared, nothing is said about the listing.
    assert check({}, failed) == []


def _mig_modes(current: str, pending: str) -> Values:
    """The MIG H100 with its MIG mode as a GPU shows it before and after `nvidia-smi -mig`."""
    gpu = mig_h100()
    gpu[GpuHealth]["health"][0] |= {"mig_current": current, "mig_pending": pending}
    return gpu


@pytest.mark.parametrize(
    ("current", "pending", "declared", "found"),
    [
        ("Enabled", "Enabled", "enabled", []),
        ("Enabled", "Enabled", "disabled", ["gpu.mig_mode"]),
        # `nvidia-smi -mig 1` ran, the reset has not: as declared once reset.
        ("Disabled", "Enabled", "enabled", ["gpu.mig_pending"]),
        ("Disabled", "Enabled", None, ["gpu.mig_pending"]),
        # A reset would turn MIG off against the declaration.
        ("Enabled", "Disabled", "enabled", ["gpu.mig_mode"]),
        ("Disabled", "Disabled", "enabled", ["gpu.mig_mode"]),
    ],
)
def test_mig_mode_and_a_change_waiting_for_a_reset(
    current: str, pending: str, declared: str | None, found: list[str]
) -> None:
    spec = expect(mig=declared) if declared else {}
    assert ids(check(spec, _mig_modes(current, pending))) == found


def test_pending_mig_change_says_what_a_reset_does() -> None:
    (finding,) = check({}, _mig_modes("Disabled", "Enabled"))
    assert (finding.severity, finding.remediation) == ("error", "reset-gpu")
    assert finding.actual.endswith(": MIG disabled now, enabled after the next reset")
    assert finding.actual.startswith("GPU 00000000:00:09.0 (NVIDIA H100 80GB HBM3")
    (against,) = check(expect(mig="enabled"), _mig_modes("Enabled", "Disabled"))
    assert against.actual.endswith("MIG enabled, disabled after the next reset")
    assert "nvidia-smi -i 00000000:00:09.0 -mig 1" in against.fix


def test_a_slice_carries_its_parent_gpu_and_capability() -> None:
    slices = gpu_checks.mig_slices(mig_h100()[NvidiaGpus])
    assert [s["profile"] for s in slices] == ["3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"]
    assert {(s["gpu_index"], s["gpu_name"], s["capability"]) for s in slices} == {
        (0, "NVIDIA H100 80GB HBM3", "9.0")
    }
    assert slices[0]["uuid"] == "MIG-00000000-0000-0000-0000-000000000000"
    assert gpu_checks.job_capabilities(mig_h100()[NvidiaGpus]) == ["9.0"]


def test_a_mig_gpu_without_slices_offers_no_capability() -> None:
    """MIG on with no GPU instance created (the -L listing then shows the GPU line alone):
    CUDA sees no device on it, so there is nothing for compat to judge."""
    gpu_line = read_fixture("nvidia-smi-L_h100-80gb-mig_590.48.01.txt").splitlines()[0]
    empty = mig_h100(listing=gpu_line)[NvidiaGpus]
    assert empty["listing"] == [asdict(g) for g in gpu_parse.parse_smi_list(gpu_line)]
    assert gpu_checks.job_capabilities(empty) == []
    # Without a listing every GPU's own capability is judged, as before MIG was read.
    assert gpu_checks.job_capabilities(mig_h100(listing=None)[NvidiaGpus]) == ["9.0"]
    # A GPU with MIG off is judged by its own capability.
    assert gpu_checks.job_capabilities(h100_vm()[NvidiaGpus]) == ["9.0"]


def test_a_jetson_without_nvidia_smi_has_the_gpu_its_container_toolkit_sees() -> None:
    """Recorded Jetson AGX Xavier: no nvidia-smi; `nvidia-container-cli info` lists its GPU."""
    jetson = gpu_values(
        nvidia_smi=False,
        toolkit_info="nvidia-container-cli_info_jetson-agx-xavier_null-fields.txt",
    )
    assert "gpu.missing" not in ids(check({"gpu": "required"}, jetson))
    assert "gpu.missing" in ids(check({"gpu": "required"}, gpu_values(nvidia_smi=False)))


# --- Every GPU check id fires: on a recording, or, where none exists, on hand-set state ------

Case = tuple[dict[str, Any], Values]
CAPPED = "nvidia-smi-q-d-power_4gpu_595.71.05_lowered-limit_PARTIAL.txt"
MIG_SLICES_DECLARED = expect(mig_slices=[{"profile": "3g.20gb", "count": 2}])

# The recorded state (spec, GPU facts) that fires each id.
FIRES_ON_RECORDING: dict[str, Callable[[], Case]] = {
    "gpu.missing": lambda: ({"gpu": "required"}, gpu_values(nvidia_smi=False)),
    "gpu.unexpected": lambda: ({"gpu": "absent"}, h100_vm()),
    "gpu.count": lambda: (expect(count=8), h100_vm()),
    "gpu.model": lambda: (expect(model="A100"), h100_vm()),
    "gpu.mig_mode": lambda: (expect(mig="enabled"), h100_vm()),
    "gpu.mig_slices": lambda: (MIG_SLICES_DECLARED, mig_h100()),
    "gpu.pcie_link": lambda: ({}, with_text_health("nvidia-smi-q_rtx4090_537.13_windows-wddm.txt")),
    "gpu.nvlink_down": lambda: (
        {}, h100_vm(nvlink="nvidia-smi_nvlink-s_v100-sxm2_inactive_PARTIAL.txt")
    ),
    "gpu.persistence": lambda: (
        {}, h100_vm(smi_xml="nvidia-smi-q-x_tesla-t4_515.105.01_reindented.xml")
    ),
    "gpu.row_remap_pending": lambda: ({}, with_text_health("nvidia-smi-q_a10_535.129.03.txt")),
    # A current limit of 500 W under a 700 W default. (The 2080 Ti table that draws 315 W over
    # its 300 W cap cannot say it: a default table prints no default limit.)
    "gpu.power_cap": lambda: ({}, with_text_health(CAPPED)),
    "gpu.nvml_mismatch": lambda: (
        {}, h100_vm(query="driver_mismatch_nvml-550.144.txt", smi_xml=None)
    ),
    "gpu.fallen_off_bus": lambda: (
        {}, h100_vm(xid_lines="kernel_xid_79_fallen-off-bus_rtx5080_journald.txt")
    ),
    "gpu.xid": lambda: ({}, h100_vm(xid_lines="kernel_xid_119_gsp_rpc_timeout.txt")),
}  # fmt: skip


def _set_health(**fields: Any) -> Values:
    """The H100 VM with some of its GPU's health fields set by hand."""
    gpu = h100_vm()
    gpu[GpuHealth]["health"][0] |= fields
    return gpu


def _set_gpu(key: str, value: Any) -> Values:
    """The H100 VM with one of GpuHealth's per-GPU maps set by hand for its GPU."""
    gpu = h100_vm()
    gpu[GpuHealth][key] = {gpu[GpuHealth]["health"][0]["pci"]: value}
    return gpu


def _zombie() -> Values:
    gpu = h100_vm()
    gpu[NvidiaGpus]["gpus"][0]["memory.used"] = "30000"
    return gpu


# Ids no recording in tests/fixtures/gpu (nor any found in public issue threads and repositories)
# shows: why, and the H100 VM's recorded state with the fields that fire it set by hand.
NO_RECORDING: dict[str, tuple[str, Callable[[], Case]]] = {
    "gpu.thermal": (
        "no recorded GPU at its slowdown temperature, at a T.Limit margin of 0 or with a thermal "
        "slowdown active",
        lambda: ({}, _set_health(tlimit_margin_c=0)),
    ),
    "gpu.recovery_action": (
        "every recorded -q says 'GPU Recovery Action: None'",
        lambda: ({}, _set_health(recovery_action="GPU Reset Required")),
    ),
    "gpu.ecc_mode_mixed": (
        "no recorded -q with an ECC change pending or GPUs in different ECC modes",
        lambda: ({}, _set_health(ecc_pending="Disabled")),
    ),
    "gpu.retired_pages_pending": (
        "no recorded -q with 'Pending Page Retirement' (or 'Blacklist') 'Yes'",
        lambda: ({}, _set_health(retired_pending=True)),
    ),
    "gpu.row_remap_failure": (
        "no recorded -q with 'Remapping Failure Occurred: Yes' (the A10's rows only wait)",
        lambda: ({}, _set_health(remap_failure=True)),
    ),
    "gpu.throttle": (
        "no recorded -q -x with a hardware slowdown active (gpu_idle at most)",
        lambda: ({}, _set_gpu("throttle", ["hw_slowdown"])),
    ),
    "gpu.ecc": (
        "no recorded -q -x with a volatile uncorrectable ECC count above 0",
        lambda: ({}, _set_gpu("ecc_uncorrectable", 2)),
    ),
    "gpu.zombie_vram": (
        "no recorded query row with memory held and no compute process (the one loaded "
        "recording has MIG on, which the rule leaves out)",
        lambda: ({}, _zombie()),
    ),
    "gpu.mig_pending": (
        "no recording of a GPU between `nvidia-smi -mig` and its reset",
        lambda: ({}, _mig_modes("Disabled", "Enabled")),
    ),
    "gpu.fabric_manager": (
        "no recorded NVSwitch host with its fabric manager stopped (the recorded H100x8 -q "
        "says Fabric State Completed); its switch count and unit state are set",
        lambda: ({}, with_text_health(
            "nvidia-smi-q_h100x8_535.161.08.txt", nvswitch_devices=4, fabricmanager="inactive"
        )),
    ),
    "gpu.uvm_missing": (
        "no recorded host without /dev/nvidia-uvm",
        lambda: ({}, h100_vm(uvm_device=False)),
    ),
    "host.reboot_pending": (
        "no recorded /var/run/reboot-required",
        lambda: ({}, h100_vm(reboot_required=True)),
    ),
    "gpu.module_missing": (
        "no recorded host whose driver module is neither loaded nor built",
        lambda: ({}, h100_vm(proc_version=None, modinfo=True, module_built="", smi_xml=None)),
    ),
}  # fmt: skip


def _fires(check_id: str, case: Case) -> None:
    spec, values = case
    (finding,) = [f for f in check(spec, values) if f.id == check_id]
    assert finding.expected and finding.actual and finding.fix
    if check_id != "gpu.xid":  # an Xid's severity and remediation are its catalog bucket's
        row = rules()["checks"][check_id]
        assert (finding.severity, finding.remediation) == (row["severity"], row["remediation"])


def test_every_gpu_id_fires_on_a_recording_or_says_why_none_exists() -> None:
    assert set(FIRES_ON_RECORDING).isdisjoint(NO_RECORDING)
    assert set(FIRES_ON_RECORDING) | set(NO_RECORDING) == set(gpu_checks.IDS)


@pytest.mark.parametrize("check_id", sorted(FIRES_ON_RECORDING))
def test_fires_on_a_recording(check_id: str) -> None:
    _fires(check_id, FIRES_ON_RECORDING[check_id]())


@pytest.mark.parametrize("check_id", sorted(NO_RECORDING), ids=lambda i: f"{i}-hand-set")
def test_fires_on_hand_set_state_for_want_of_a_recording(check_id: str) -> None:
    """The rule can fire; that a real GPU prints what fires it is not shown (NO_RECORDING)."""
    _fires(check_id, NO_RECORDING[check_id][1]())
