"""gpurig.named_tuple's NamedTuple makes the class typing.NamedTuple makes from the same body:
fields, defaults, methods, properties, docstring, _replace, repr, equality and pickling."""

from __future__ import annotations

import pickle
import typing

import pytest

from gpurig import named_tuple
from gpurig.spec.finding import Finding


def body(base: type) -> type:
    class Port(base):  # type: ignore[valid-type, misc]
        """A port."""

        name: str
        rate: int | None = None
        tags: tuple[str, ...] = ()

        @property
        def fast(self) -> bool:
            return (self.rate or 0) >= 400

        def named(self, name: str) -> Port:
            return self._replace(name=name)

    return Port


def test_the_same_class_as_typing_makes() -> None:
    ours, theirs = body(named_tuple.NamedTuple), body(typing.NamedTuple)
    assert ours._fields == theirs._fields == ("name", "rate", "tags")
    assert ours._field_defaults == theirs._field_defaults == {"rate": None, "tags": ()}
    assert ours.__doc__ == theirs.__doc__ == "A port."
    # As written (typing wraps each string in a ForwardRef, which is the compiling it costs).
    written = {k: v.__forward_arg__ for k, v in theirs.__annotations__.items()}
    assert ours.__annotations__ == written
    port = ours("ib0", 400)
    assert port == ("ib0", 400, ()) == theirs("ib0", 400) and isinstance(port, tuple)
    assert repr(port) == repr(theirs("ib0", 400)) == "Port(name='ib0', rate=400, tags=())"
    assert port.fast and type(port.named("ib1")) is ours and port.named("ib1").name == "ib1"
    assert port._asdict() == {"name": "ib0", "rate": 400, "tags": ()}
    with pytest.raises(AttributeError):
        port.extra = 1  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        ours()  # the field without a default


def test_a_field_without_a_default_after_one_with_is_refused() -> None:
    with pytest.raises(TypeError, match="follows one with"):

        class Bad(named_tuple.NamedTuple):
            first: int = 0
            second: int


def test_a_module_level_record_pickles_as_itself() -> None:
    finding = Finding("disk.full", "error", "/", "10%", "5%", "free it")
    assert pickle.loads(pickle.dumps(finding)) == finding
    assert type(pickle.loads(pickle.dumps(finding))) is Finding
