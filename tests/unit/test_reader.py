"""gpurig's readers import nothing of pyinfra (the node contracts load them without it), and
pyinfra still takes them as facts: one runs here through pyinfra's own @local connector."""

from __future__ import annotations

import shlex

from pyinfra.api import Config, Inventory, State

from gpurig.facts.reader import Reader


class Words(Reader[list[str]]):
    """A reader as small as a fact gets: its command's lines, or [] when it printed none."""

    @staticmethod
    def default() -> list[str]:
        return []

    def command(self, text: str) -> str:
        return f"printf '%s\\n' {shlex.quote(text)}"

    def process(self, output: list[str]) -> list[str]:
        return [f"read: {line}" for line in output]


class Missing(Words):
    def requires_command(self, text: str) -> str:
        return "gpurig-no-such-tool"


def test_pyinfra_runs_a_reader_as_its_own_fact() -> None:
    inventory = Inventory((["@local"], {}))
    State(inventory, Config())
    host = inventory.get_host("@local")
    host.connect()
    assert Words.name == f"{__name__}.Words"
    assert host.get_fact(Words, text="a 'quoted' word") == ["read: a 'quoted' word"]
    assert host.get_fact(Words, text="") == ["read: "]
    assert host.get_fact(Missing, text="x") == []  # pyinfra's default() for a missing tool
