"""What the site and the README show a user to copy: every YAML block that is an inventory or
a spec passes `gpurig validate`'s checks, and every `gpurig` command line in a shell block
names a command and options the CLI has."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest
import yaml

from gpurig.cli.main import main
from gpurig.report import explain
from gpurig.spec.inventory import InventoryError, load_inventory_text, load_spec_file, schema

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGES = [*sorted((REPO_ROOT / "docs").rglob("*.md")), REPO_ROOT / "README.md"]
SPEC_KEYS = set(schema()["$defs"]["spec"]["properties"])


def blocks(language: str) -> list[tuple[str, str]]:
    """(page:line, text) of each fenced block of `language` in the pages."""
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for match in re.finditer(rf"```{language}\n(.*?)```", text, re.S):
            line = text[: match.start()].count("\n") + 2
            found.append((f"{page.relative_to(REPO_ROOT)}:{line}", match.group(1)))
    return found


def examples() -> list[tuple[str, str, str]]:
    """(where, kind, text) of each YAML block that is an inventory or a spec."""
    found = []
    for where, text in blocks("yaml"):
        data = yaml.safe_load(text)
        if isinstance(data, dict) and {"version", "hosts"} <= set(data):
            found.append((where, "inventory", text))
        elif isinstance(data, dict) and data and set(data) <= SPEC_KEYS:
            found.append((where, "spec", text))
    return found


def test_the_pages_show_inventories_and_specs() -> None:
    kinds = [kind for _, kind, _ in examples()]
    assert kinds.count("inventory") >= 2 and kinds.count("spec") >= 3


@pytest.mark.parametrize(("where", "kind", "text"), examples(), ids=[e[0] for e in examples()])
def test_every_inventory_and_spec_shown_validates(
    tmp_path: Path, where: str, kind: str, text: str
) -> None:
    try:
        if kind == "inventory":
            load_inventory_text(text, where)
        else:
            path = tmp_path / "node.yaml"
            path.write_text(text)
            load_spec_file(path, "node")
    except InventoryError as exc:
        pytest.fail(f"{where}: the {kind} shown does not validate: {exc}")


def command_lines() -> list[tuple[str, list[str]]]:
    """(where, argv after `gpurig`) of each `gpurig ...` line in a shell block."""
    found = []
    for where, text in blocks("sh"):
        for line in text.replace("\\\n", " ").splitlines():  # continued lines joined
            words = line.split(" #", 1)[0].strip()
            if words.startswith("gpurig "):
                found.append((where, shlex.split(words)[1:]))
    return found


def test_every_gpurig_command_line_shown_names_what_the_cli_has() -> None:
    lines = command_lines()
    assert len(lines) >= 10
    assert unknown_to_the_cli(lines) == []


def test_every_gpurig_command_a_finding_s_text_names_is_one_the_cli_has() -> None:
    """What `gpurig explain` and the findings pages tell a user to run (`gpurig ack gpu.xid`,
    `gpurig --version`) exists: no option the CLI lacks."""
    lines = []
    for found in explain.entries():
        text = " ".join(explain.as_text(found).split())
        lines += [
            (found.id, shlex.split(span)[1:]) for span in re.findall(r"`(gpurig [^`]+)`", text)
        ]
    assert len(lines) >= 10 and ("gpurig.internal_error", ["--version"]) in lines
    assert unknown_to_the_cli(lines) == []


def unknown_to_the_cli(lines: list[tuple[str, list[str]]]) -> list[str]:
    """Each command or option of the (where, argv after `gpurig`) lines the CLI does not have."""
    wrong = []
    group_options = {opt for param in main.params for opt in param.opts} | {"--help", "-h"}
    for where, argv in lines:
        if argv and argv[0].startswith("-"):  # the group's own (--version)
            if argv[0] not in group_options:
                wrong.append(f"{where}: gpurig has no option {argv[0]}")
            continue
        context = click.Context(main)
        command = main.get_command(context, argv[0]) if argv else None
        while isinstance(command, click.Group) and len(argv) > 1:
            argv = argv[1:]
            command = command.get_command(context, argv[0])  # a group (lazy too): its command
        if command is None:
            wrong.append(f"{where}: no command gpurig {argv[0] if argv else ''}")
            continue
        known = {opt for param in command.params for opt in (*param.opts, *param.secondary_opts)}
        known |= {"--help", "-h"}
        for word in argv[1:]:
            option = word.split("=", 1)[0]
            if option.startswith("-") and option not in known and option != "-":
                wrong.append(f"{where}: gpurig {argv[0]} has no option {option}")
    return wrong
