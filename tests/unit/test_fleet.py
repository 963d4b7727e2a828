"""Fleet grouping and outliers over versions read from recorded nvidia-smi outputs."""

from __future__ import annotations

import json

from gpu_fixtures import read_fixture

from gpurig.read.gpu_parse import parse_smi_header
from gpurig.report import fleet


def host(table: str, kernel: str, image: str) -> dict[str, object]:
    header = parse_smi_header(read_fixture(table))
    return {"driver": header.driver, "cuda": header.cuda, "kernel": kernel,
            "image": {"trainer": image}, "code": None}  # fmt: skip


SAME = "nvidia-smi_h100x8_550.90.07.txt"
DIGEST = "sha256:" + "a" * 64
FLEET = {
    "h100-1": host(SAME, "5.15.0-157-generic", DIGEST),
    "h100-2": host(SAME, "5.15.0-157-generic", DIGEST),
    "h100-3": host("nvidia-smi_h100_580.159.04_vm.txt", "6.18.44-fc-v657-gpu", DIGEST),
}


def test_groups_put_the_majority_first() -> None:
    drivers = [g for g in fleet.groups(FLEET) if g.dimension == "driver"]
    assert [(g.value, g.hosts) for g in drivers] == [
        ("550.90.07", ["h100-1", "h100-2"]),
        ("580.159.04", ["h100-3"]),
    ]
    assert [g.hosts for g in fleet.groups(FLEET) if g.dimension == "image:trainer"] == [
        ["h100-1", "h100-2", "h100-3"]
    ]


def test_mixed_versions_are_warnings_naming_the_outliers() -> None:
    found = {f.id: f for f in fleet.findings(FLEET)}
    assert set(found) == {"fleet.mixed_driver", "fleet.mixed_cuda", "fleet.mixed_kernel"}
    driver = found["fleet.mixed_driver"]
    assert (driver.severity, driver.remediation) == ("warn", "reconverge")
    assert driver.expected == "550.90.07 (on 2 hosts)"
    assert driver.actual == "h100-3: 580.159.04"
    assert found["fleet.mixed_cuda"].actual == "h100-3: 13.0"


def test_a_majority_of_one_host_is_said_so() -> None:
    two = {name: FLEET[name] for name in ("h100-1", "h100-3")}
    driver = next(f for f in fleet.findings(two) if f.id == "fleet.mixed_driver")
    assert driver.expected.endswith(" (on 1 host)")


def test_a_uniform_fleet_has_no_findings() -> None:
    assert fleet.findings({k: v for k, v in FLEET.items() if k != "h100-3"}) == []


def test_per_container_images_are_compared_by_name() -> None:
    odd = {**FLEET, "h100-2": {**FLEET["h100-2"], "image": {"trainer": "sha256:" + "b" * 64}}}
    (finding,) = [f for f in fleet.findings(odd) if f.id == "fleet.mixed_image"]
    assert finding.message.startswith("2 different container image of trainer versions")


def test_renderers() -> None:
    table = fleet.render_table(FLEET).splitlines()
    assert table[0].split() == ["DIMENSION", "VALUE", "HOSTS"]
    assert any(line.split()[:3] == ["driver", "550.90.07", "2"] for line in table)
    assert json.loads(json.dumps(fleet.to_json(FLEET)))["findings"][0]["id"].startswith("fleet.")


def test_markdown_escapes_host_output() -> None:
    hostile = {"a|b": {"kernel": "6.8`|<b>\n"}, "c": {"kernel": "6.8"}}
    text = fleet.render_markdown(hostile)
    row = next(line for line in text.splitlines() if "a\\|b" in line)
    assert row.count("|") - row.count("\\|") == 4  # only the table's own cell separators
    # the value stays inside a code span (shown literally), its newline shown as \n
    assert "| `6.8'\\|<b>\\n` |" in row
