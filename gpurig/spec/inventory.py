"""The inventory: YAML fleets validated against `schemas/`, then merged into one spec per host.

Everything is refused before any host is touched, and every problem is reported at once as
`FILE:LINE: key.path: what was expected`, so one edit-validate round fixes a whole file.
"""

from __future__ import annotations

import json
import math
import os
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import cache, reduce
from typing import TYPE_CHECKING, Any

from gpurig import DEPLOY_ROOT
from gpurig.named_tuple import NamedTuple
from gpurig.spec.hostkeys import key_problem
from gpurig.spec.model import normalise
from gpurig.spec.schema_check import passes
from gpurig.spec.secret_use import leaked_secrets
from gpurig.spec.text_file import YamlRefused, read_text
from gpurig.spec.user_scope import root_only

if TYPE_CHECKING:  # jsonschema is loaded only to explain a document that does not pass
    from jsonschema import Draft202012Validator, TypeChecker, ValidationError

    from gpurig.spec.safe_yaml import Lines, Parsed

SCHEMA_PATH = os.path.join(DEPLOY_ROOT, "schemas", "inventory.schema.json")

# Options docker or podman accept after the container path (modes, SELinux labels, propagation).
MOUNT_OPTIONS = (
    "ro", "rw", "z", "Z", "U", "O", "nocopy", "consistent", "cached", "delegated",
    "shared", "rshared", "slave", "rslave", "private", "rprivate",
    "exec", "noexec", "suid", "nosuid", "dev", "nodev",
)  # fmt: skip

_TYPE_NAMES = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
}

KeyPath = tuple[Any, ...]  # mapping keys (str, or whatever YAML gave) and list indices


class Problem(NamedTuple):
    """One reason an inventory is refused, pointing at the line to edit."""

    file: str
    line: int | None
    path: KeyPath
    message: str

    def __str__(self) -> str:
        parts = [self.file if self.line is None else f"{self.file}:{self.line}"]
        if self.path:
            parts.append(format_path(self.path))
        return ": ".join([*parts, self.message])


class InventoryError(Exception):
    """Raised with every problem found; str() is one line per problem."""

    def __init__(self, problems: Sequence[Problem]) -> None:
        self.problems = list(problems)
        super().__init__("\n".join(str(p) for p in self.problems))


class Jump(NamedTuple):
    """The login node a host is reached through (`ssh.jump`); its host key is always pinned.
    `user` and `key` are the host's own unless the jump names others (applied at load)."""

    address: str
    host_key: str
    port: int = 22
    user: str | None = None
    key: str | None = None


class SshSettings(NamedTuple):
    """How to reach a host; host keys are always checked (see pyinfra_inventory)."""

    port: int = 22
    user: str | None = None
    key: str | None = None
    host_key: str | None = None
    connect_timeout: int | None = None
    jump: Jump | None = None


class Host(NamedTuple):
    """One host after merging defaults, its groups and its own entry. Its `spec` is normalised
    here, on the way in (gpurig.spec.model.normalise: defaults applied, each value spelt one
    way), and nowhere again: drift, the contracts, `up --local` and onboarding read it as is."""

    name: str
    address: str
    ssh: SshSettings
    groups: tuple[str, ...]
    spec: dict[str, Any]
    source: str
    line: int


class Inventory(NamedTuple):
    """Hosts in file order, across every file loaded."""

    hosts: tuple[Host, ...]

    def groups(self) -> dict[str, list[str]]:
        """Group name -> names of its hosts, in host order (what pyinfra wants)."""
        members: dict[str, list[str]] = {}
        for host in self.hosts:
            for group in host.groups:
                members.setdefault(group, []).append(host.name)
        return members


def format_path(path: KeyPath) -> str:
    """Render a key path as `hosts.a100-1.spec.mounts[0]`; odd keys as `repos["/srv/x"]`."""
    out = ""
    for step in path:
        if isinstance(step, int):
            out += f"[{step}]"
        elif isinstance(step, str) and re.fullmatch(r"[A-Za-z0-9_-]+", step):
            out += f".{step}" if out else step
        else:
            out += f"[{json.dumps(str(step))}]"
    return out


def repo_venv(path: str, repo: Mapping[str, Any]) -> str | None:
    """The environment a repo's `python` installs into (default `<repo>/.venv`), or None."""
    python = repo.get("python")
    return (python.get("venv") or f"{path}/.venv") if python else None


def deep_merge(base: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """Override wins; maps merge key by key, lists and scalars replace (DESIGN's rule)."""
    merged = dict(base)
    for key, value in override.items():
        old = merged.get(key)
        if isinstance(old, Mapping) and isinstance(value, Mapping):
            merged[key] = deep_merge(old, value)
        else:
            merged[key] = value
    return merged


def mount_problem(mount: str) -> str | None:
    """What `SRC:DST[:OPTIONS]` should have been, or None; a regex could not say which part."""
    parts = mount.split(":")
    if len(parts) not in (2, 3) or not all(parts[:2]):
        return "expected a mount SRC:DST or SRC:DST:OPTIONS"
    if not parts[1].startswith("/"):
        return "expected an absolute container path after the first ':'"
    unknown = [o for o in parts[2].split(",") if o not in MOUNT_OPTIONS] if len(parts) == 3 else []
    if unknown:
        return f"expected mount options among {', '.join(MOUNT_OPTIONS)}; {unknown[0]!r} is not one"
    return None


@cache
def schema() -> dict[str, Any]:
    """The inventory JSON Schema (also what editors use)."""
    with open(SCHEMA_PATH, encoding="utf-8") as f:
        return json.loads(f.read())


def _is_integer(_checker: TypeChecker, value: Any) -> bool:
    """An integer as YAML wrote it: `22`, never `22.0` (which JSON cannot tell apart) or `true`."""
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(_checker: TypeChecker, value: Any) -> bool:
    """A finite number: `.nan` compares false with every bound, so it would pass them all."""
    return _is_integer(_checker, value) or (isinstance(value, float) and math.isfinite(value))


@cache
def _validator_class() -> type[Draft202012Validator]:
    """The schema's types as a YAML file has them; editors, which see JSON, accept 22.0 as a
    port."""
    from jsonschema import Draft202012Validator, validators

    return validators.extend(
        Draft202012Validator,
        type_checker=Draft202012Validator.TYPE_CHECKER.redefine_many(
            {"integer": _is_integer, "number": _is_number}
        ),
    )


@cache
def _validator() -> Draft202012Validator:
    return _validator_class()(schema())


@cache
def _spec_validator() -> Draft202012Validator:
    """A host's `spec` alone, with the inventory schema's definitions."""
    return _validator_class()({"$defs": schema()["$defs"], "$ref": "#/$defs/spec"})


def load_inventory(paths: Iterable[str | os.PathLike[str]]) -> Inventory:
    """Load, validate and merge inventory files; raise InventoryError listing every problem."""
    problems: list[Problem] = []
    hosts: list[Host] = []
    seen: dict[str, Host] = {}
    for path in paths:
        file_problems, file_hosts = _load_file(str(path))
        for host in file_hosts:
            first = seen.get(host.name)
            if first is None:
                seen[host.name] = host
                hosts.append(host)
            else:
                file_problems.append(
                    Problem(
                        host.source,
                        host.line,
                        ("hosts", host.name),
                        f"host {host.name!r} is already defined at {first.source}:{first.line}",
                    )
                )
        problems += sorted(file_problems, key=lambda p: p.line or 0)
    if problems:
        raise InventoryError(problems)
    return Inventory(tuple(hosts))


def load_inventory_text(text: str, source: str) -> Inventory:
    """Validate one inventory not yet written (an edit to `source`), as load_inventory would."""
    problems, hosts = _load_text(source, text)
    if problems:
        raise InventoryError(sorted(problems, key=lambda p: p.line or 0))
    return Inventory(tuple(hosts))


def _load_file(file: str) -> tuple[list[Problem], list[Host]]:
    """Problems in one file, or its hosts when it has none."""
    try:
        text = read_text(file)
    except YamlRefused as exc:
        return [Problem(file, exc.line, (), exc.message)], []
    return _load_text(file, text)


def _parse(file: str, text: str) -> tuple[list[Problem], Parsed | None]:
    """Syntax problems (every duplicate key at once), or none and the parsed document."""
    from gpurig.spec.safe_yaml import parse

    try:
        parsed = parse(text)
    except YamlRefused as exc:
        return [Problem(file, exc.line, (), exc.message)], None
    duplicates = [
        Problem(file, line, path, f"duplicate key {key!r}; first defined at line {first}")
        for line, path, key, first in parsed.duplicates
    ]
    return (duplicates, None) if duplicates else ([], parsed)


def _schema_problems(
    file: str, lines: Lines, data: Any, validator: Any, ref: str | None = None
) -> list[Problem]:
    """None where the document passes (schema_check, no jsonschema: the node contracts load a
    spec at every job start); otherwise jsonschema's problems, at their lines."""
    if passes(schema(), data, ref):
        return []
    validator = validator()
    problems = [p for err in validator.iter_errors(data) for p in _explain(file, lines, err)]
    return list(dict.fromkeys(problems))  # `required` reports each missing key per error


def _load_text(file: str, text: str) -> tuple[list[Problem], list[Host]]:
    problems, parsed = _parse(file, text)
    if problems or parsed is None:
        return problems, []
    data, lines = parsed.data, parsed.lines
    problems = _schema_problems(file, lines, data, _validator)
    checks = list(_semantic_problems(file, lines, data))
    if problems or checks:
        return problems + checks, []
    hosts = [_merge_host(file, lines, data, name) for name in data["hosts"]]
    missing = [
        p
        for host in hosts
        for p in _missing_images(file, lines, ("hosts", host.name, "spec"), host.spec)
    ]
    missing += [p for host in hosts for p in _scope_problems(file, lines, data, host)]
    missing += [p for host in hosts for p in _secret_problems(file, lines, data, host)]
    missing = list(dict.fromkeys(missing))  # one level's item, refused for two hosts: once
    return missing, hosts if not missing else []


def load_spec_file(path: str | os.PathLike[str], name: str) -> Host:
    """Host `name` (this machine) from a file holding only its spec (`gpurig drift --local
    --spec`), validated as an inventory host's `spec` is; raise InventoryError.

    The node contracts read one spec file at every job start: its parse is kept by content
    (gpurig.spec.runtime) and the kept data validated as a parse's is; only a spec that passes
    is kept, and one that fails is parsed again, for its problems' lines."""
    from gpurig.spec import runtime

    file = str(path)
    try:
        text = read_text(file)
    except YamlRefused as exc:
        raise InventoryError([Problem(file, exc.line, (), exc.message)]) from None
    data = runtime.kept_parse(text)
    if data is not None and not _spec_problems(file, None, data):
        return Host(name, "localhost", SshSettings(), (), normalise(data), file, 1)
    problems, parsed = _parse(file, text)
    if problems or parsed is None:
        raise InventoryError(problems)
    data, lines = parsed.data, parsed.lines
    problems = _spec_problems(file, lines, data)
    if problems:
        raise InventoryError(sorted(problems, key=lambda p: p.line or 0))
    runtime.keep_parse(text, data)
    return Host(name, "localhost", SshSettings(), (), normalise(data), file, 1)


def _spec_problems(file: str, lines: Lines, data: Any) -> list[Problem]:
    """What is wrong with one host's spec, at its lines (line 1 without a document)."""
    problems = _schema_problems(file, lines, data, _spec_validator, "#/$defs/spec")
    problems += _mount_problems(file, lines, (), data)
    if not problems:
        problems += _missing_images(file, lines, (), data, merged=False)
        problems += [
            Problem(file, _line(lines, path), path, why) for path, why in root_only(normalise(data))
        ]
    return problems


def _line(lines: Lines, path: KeyPath) -> int:
    """Line of the deepest key or list item along `path` that the document has (`lines` is
    gpurig.spec.safe_yaml's, None where there is no document)."""
    line = 1
    for step in path:
        try:
            line, lines = lines[step]
        except (KeyError, IndexError, TypeError):
            break
    return line


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, (dict, list)):
        return _TYPE_NAMES["object" if isinstance(value, dict) else "array"]
    return repr(value)


def _explain(file: str, lines: Lines, err: ValidationError) -> Iterator[Problem]:
    """Turn one jsonschema error into problems at the offending key's line."""
    path: KeyPath = tuple(err.absolute_path)
    if "propertyNames" in err.absolute_schema_path:
        # jsonschema validates a key as an instance without adding it to the path.
        path = (*path, err.instance)
    if err.validator == "additionalProperties":
        allowed = ", ".join(err.schema.get("properties", {}))
        for key in err.instance:
            if key not in err.schema.get("properties", {}):
                where = (*path, key)
                yield Problem(
                    file, _line(lines, where), where, f"unknown key {key!r}; allowed: {allowed}"
                )
        return
    if err.validator == "required":
        for key in err.validator_value:
            if key not in err.instance:
                yield Problem(file, _line(lines, path), path, f"missing required key {key!r}")
        return
    yield Problem(file, _line(lines, path), path, _expectation(err) + _nearest(err))


def _nearest(err: ValidationError) -> str:
    """`; nearest: X` for a string that is not one of an enum's words but close to one (an
    unknown finding id in node_contracts.actions), else nothing."""
    if err.validator != "enum" or not isinstance(err.instance, str):
        return ""
    from difflib import get_close_matches

    words = [str(word) for word in err.validator_value]
    close = get_close_matches(err.instance, words, n=1, cutoff=0.6)
    return f"; nearest: {close[0]}" if close else ""


def _expectation(err: ValidationError) -> str:
    got = f"; got {_show(err.instance)}"
    expected = err.schema.get("x-expected")
    if expected:
        fix = err.schema.get("x-fix")
        return f"expected {expected}{got}" + (f" ({fix})" if fix else "")
    value = err.validator_value
    if err.validator == "type":
        return f"expected {_TYPE_NAMES.get(value, value)}{got}"
    if err.validator == "enum":
        return f"expected one of {', '.join(map(str, value))}{got}"
    if err.validator == "const":
        return f"expected {value}{got}"
    if err.validator == "minimum":
        return f"expected at least {value}{got}"
    if err.validator == "maximum":
        return f"expected at most {value}{got}"
    if err.validator == "minLength":
        return f"expected a non-empty string{got}"
    if err.validator == "uniqueItems":
        return "expected no repeated items"
    return err.message


def _levels(data: Any) -> Iterator[tuple[KeyPath, Mapping[str, Any]]]:
    """Every (path, level) that may carry ssh and spec: defaults, groups, hosts."""
    if not isinstance(data, Mapping):
        return
    if isinstance(data.get("defaults"), Mapping):
        yield ("defaults",), data["defaults"]
    for section in ("groups", "hosts"):
        entries = data.get(section)
        if isinstance(entries, Mapping):
            for name, level in entries.items():
                if isinstance(level, Mapping):
                    yield (section, name), level


def _semantic_problems(file: str, lines: Lines, data: Any) -> Iterator[Problem]:
    """Checks the schema cannot express: group references, mount syntax, host key contents."""
    groups = data.get("groups") if isinstance(data, Mapping) else None
    defined = list(groups) if isinstance(groups, Mapping) else []
    key_pattern = schema()["$defs"]["ssh"]["properties"]["host_key"]["pattern"]
    for prefix, level in _levels(data):
        listed = level.get("groups") if prefix[0] == "hosts" else None
        for index, group in enumerate(listed if isinstance(listed, list) else []):
            if isinstance(group, str) and group not in defined:
                where = (*prefix, "groups", index)
                known = ", ".join(defined) or "none"
                yield Problem(
                    file, _line(lines, where), where, f"undefined group {group!r}; defined: {known}"
                )
        for where, host_key in _host_keys(prefix, level.get("ssh")):
            if isinstance(host_key, str) and re.search(key_pattern, host_key):
                reason = key_problem(host_key)
                if reason:
                    yield Problem(file, _line(lines, where), where, reason)
        yield from _mount_problems(file, lines, (*prefix, "spec"), level.get("spec"))


def _host_keys(prefix: KeyPath, ssh: Any) -> Iterator[tuple[KeyPath, Any]]:
    """(path, value) of the host keys an `ssh` level pins: the host's and its login node's."""
    if not isinstance(ssh, Mapping):
        return
    yield (*prefix, "ssh", "host_key"), ssh.get("host_key")
    jump = ssh.get("jump")
    if isinstance(jump, Mapping):
        yield (*prefix, "ssh", "jump", "host_key"), jump.get("host_key")


def _mount_problems(file: str, lines: Lines, path: KeyPath, spec: Any) -> Iterator[Problem]:
    """Mount syntax in the spec at `path` of the document."""
    containers = spec.get("containers") if isinstance(spec, Mapping) else None
    if not isinstance(containers, Mapping):
        return
    for name, container in containers.items():
        mounts = container.get("mounts") if isinstance(container, Mapping) else None
        for index, mount in enumerate(mounts if isinstance(mounts, list) else []):
            reason = mount_problem(mount) if isinstance(mount, str) else None
            if reason:
                where = (*path, "containers", name, "mounts", index)
                yield Problem(file, _line(lines, where), where, f"{reason}; got {mount!r}")


def _merge_host(file: str, lines: Lines, data: Mapping[str, Any], name: str) -> Host:
    entry = data["hosts"][name]
    groups = tuple(entry.get("groups", ()))
    levels = [data.get("defaults", {}), *(data["groups"][g] for g in groups), entry]
    ssh = reduce(deep_merge, (level.get("ssh", {}) for level in levels), {})
    spec = reduce(deep_merge, (level.get("spec", {}) for level in levels), {})
    jump = ssh.pop("jump", None)
    if jump is not None:  # the login node is logged in to as the host is, unless it says
        jump = Jump(**{"user": ssh.get("user"), "key": ssh.get("key"), **jump})
    return Host(
        name=name,
        address=entry["address"],
        ssh=SshSettings(**ssh, jump=jump),
        groups=groups,
        spec=normalise(spec),
        source=file,
        line=_line(lines, ("hosts", name)),
    )


def _declared(level: Any, path: KeyPath) -> bool:
    """Whether a level's spec declares `path` (its first key is enough: lists replace)."""
    spec = level.get("spec") if isinstance(level, Mapping) else None
    return (
        isinstance(spec, Mapping)
        and path[0] in spec
        and (len(path) == 1 or _lookup(spec, path) is not None)
    )


def _lookup(value: Any, path: KeyPath) -> Any:
    for step in path:
        try:
            value = value[step]
        except (KeyError, IndexError, TypeError):
            return None
    return value


def _declaring(data: Mapping[str, Any], host: Host, path: KeyPath) -> KeyPath:
    """The level whose spec declares `path` of `host`'s merged spec: the host, then its groups
    last first, then the defaults (the host where none does)."""
    levels = [(("hosts", host.name), data["hosts"][host.name])]
    levels += [(("groups", g), data["groups"][g]) for g in reversed(host.groups)]
    levels.append((("defaults",), data.get("defaults", {})))
    return next((p for p, level in levels if _declared(level, path)), levels[0][0])


def _scope_problems(
    file: str, lines: Lines, data: Mapping[str, Any], host: Host
) -> Iterator[Problem]:
    """Root-only items of a user-scope host, each at the line of the level that declares it."""
    for path, why in root_only(host.spec):
        prefix = _declaring(data, host, path)
        where = (*prefix, "spec", *path)
        note = "" if prefix[0] == "hosts" else f" (host {host.name} has scope: user)"
        yield Problem(file, _line(lines, where), where, why + note)


def _secret_problems(
    file: str, lines: Lines, data: Mapping[str, Any], host: Host
) -> Iterator[Problem]:
    """A declared secret's value in a container's command or env would be on the engine's
    command line and in its inspect output for every account that may ask: refused, pointing
    at the secret's own file. A credential in a repo URL's query: refused (git would hold it
    in its argv and .git/config)."""
    for path, why in leaked_secrets(host.spec):
        where = (*_declaring(data, host, path), "spec", *path)
        yield Problem(file, _line(lines, where), where, why)


def _missing_images(
    file: str, lines: Lines, path: KeyPath, spec: Mapping[str, Any], merged: bool = True
) -> Iterator[Problem]:
    """Every container needs an image, but any level may supply it: check after merging."""
    after = " after merging defaults, groups and host" if merged else ""
    expected = schema()["$defs"]["container"]["properties"]["image"]["x-expected"]
    for name, container in spec.get("containers", {}).items():
        if "image" not in container:
            where = (*path, "containers", name)
            yield Problem(
                file,
                _line(lines, where),
                where,
                f"no image{after}; expected {expected}",
            )
