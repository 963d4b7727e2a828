"""typing.NamedTuple's classes, made by collections.namedtuple: `class X(NamedTuple)` with this
module's NamedTuple is the same class (its annotated fields in order, their defaults, its
methods, properties and docstring), and a type checker reads it as typing's.

typing's NamedTuple checks each field's annotation at import, and with `from __future__ import
annotations` every annotation is a string that it compiles: three quarters of what creating one
cost, for each of the thirty-odd a node contract loads at every job start
(benchmarks/node_contracts.py). The annotations are kept as written."""

from __future__ import annotations

from collections import namedtuple

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import NamedTuple as NamedTuple
else:

    class _Made(type):
        """Makes each subclass of NamedTuple a subclass of a collections.namedtuple."""

        def __new__(mcls, name: str, bases: tuple[type, ...], body: dict[str, object]) -> type:
            if not bases:  # NamedTuple itself
                return super().__new__(mcls, name, bases, body)
            names = tuple(body.get("__annotations__", {}))  # type: ignore[call-overload]
            defaults = [body[field] for field in names if field in body]
            if any(field in body for field in names[: len(names) - len(defaults)]):
                raise TypeError(f"{name}: a field without a default follows one with")
            base = namedtuple(name, names, defaults=defaults, module=str(body["__module__"]))
            rest = {k: v for k, v in body.items() if k not in names}
            return type(name, (base,), {**rest, "__slots__": ()})

    class NamedTuple(metaclass=_Made):
        """Base of a record: see the module's docstring."""
