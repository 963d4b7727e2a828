"""The base of every gpurig reader: a fact in pyinfra's shape (`command()` builds the shell,
`process()` parses its lines, `default()` answers when it printed nothing) that imports nothing
of pyinfra. The node contracts run these readers' commands themselves, at every job start on
every node, without loading an SSH stack; pyinfra's `host.get_fact` takes them as they are
(it reads `name`, `shell_executable`, `requires_command`, `check_preconditions`, `command`,
`process` and `default`; tests/unit/test_reader.py runs one through it)."""

from __future__ import annotations

from typing import Any, Generic, TypeVar

T = TypeVar("T")


class Reader(Generic[T]):
    """One concern's read of a host: shell text and the parser of what it prints."""

    name: str
    abstract: bool = True
    shell_executable: str | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.name = f"{cls.__module__}.{cls.__name__}"

    def requires_command(self, *args: Any, **kwargs: Any) -> str | None:
        return None

    def check_preconditions(self, state: Any, host: Any) -> str | None:
        return None

    @staticmethod
    def default() -> Any:
        return None

    def process(self, output: list[str]) -> T:
        return "\n".join(output)  # type: ignore[return-value]
