"""`gpurig onboard`: a fresh rental to a converged, verified host recorded in the inventory.

Five steps, each refusing at the first thing wrong and named in the error: preflight
(read-only: host key, login, drift's checks and what only a new host needs, read in one round
trip, and the sources the spec needs reached from the host), record (the inventory edited in
place with its comments and order kept), converge (this host only, summarised per concern;
pyinfra's log kept in a file), verify (drift clean), accept (gpurig.onboard.accept). A preflight
refusal leaves the inventory byte for byte as it was. Every run ends with one verdict line:
the step, why, and the command to run next.

The host is recorded before the converge, not after: the converge runs from the inventory file
(its host key is what pyinfra checks strictly), and a host the converge has begun to change is a
managed host that `gpurig drift` should see. Running the same `gpurig onboard` again is the way
on after a failure: preflight finds the key as recorded and the converge finishes the job.
"""

from __future__ import annotations

import io
import re
import shlex
import stat
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import paramiko
from pyinfra.api.exceptions import ConnectError
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.scalarstring import DoubleQuotedScalarString
from ruamel.yaml.util import load_yaml_guess_indent

from gpurig.checks.all import ODD_OUTPUT, check
from gpurig.checks.node import disk_paths
from gpurig.data.tables import table
from gpurig.facts.gpurig_container import CpuQuota
from gpurig.facts.gpurig_node import CgroupMemory, DiskSpace, EngineVersions, Login
from gpurig.facts.gpurig_nvidia import NvidiaGpus
from gpurig.facts.gpurig_packages import OsRelease
from gpurig.facts.gpurig_reach import AptSources, Reach
from gpurig.facts.round_trip import Read, Snapshot, Unreadable, required_reads
from gpurig.fsutil import atomic_write, xdg_dir
from gpurig.onboard import accept
from gpurig.read import sources
from gpurig.read.acceptance import DEFAULT_MARGIN
from gpurig.remote.converge import ConvergeResult, converge
from gpurig.remote.drift import Then, probe_hosts, run_drift
from gpurig.remote.jump import LOGINS, endpoint
from gpurig.remote.key_load import refuse_unloadable
from gpurig.remote.key_scan import fetch_host_key
from gpurig.remote.pyinfra_inventory import cache_dir, jump_data
from gpurig.report.render import to_table
from gpurig.spec.finding import Finding, HostReport
from gpurig.spec.hostkeys import (
    changed_message,
    fingerprint,
    is_mismatch,
    refused_jump,
)
from gpurig.spec.inventory import (
    Host,
    InventoryError,
    load_inventory,
    load_inventory_text,
)
from gpurig.spec.key_paths import home_relative
from gpurig.spec.text_file import YamlRefused, read_bytes
from gpurig.spec.textsafe import visible
from gpurig.spec.units import format_size
from gpurig.spec.user_scope import is_user
from gpurig.spec.words import counted

Status = Literal["ok", "warn", "FAIL"]

# Releases onboarding accepts: (first, last) VERSION_ID, inclusive.
SUPPORTED_OS = {"debian": ((11,), (13,)), "ubuntu": ((20, 4), (24, 4))}
# Of those, the releases tested for real, and how: Debian 12 is what every sandbox host runs;
# Debian 11 and 13 hosts are converged and checked by the release matrix
# (tests/integration/test_releases.py), and their tools' outputs fed to the parsers
# (tests/fixtures/release). Ubuntu's archive is out of reach of the test machines: an Ubuntu
# release is covered only by the Debian release closest to it (README), so onboarding says it
# is untested (a warn line naming it).
TESTED_OS = {
    ("debian", "12"): "converged and checked on sandbox hosts",
    ("debian", "11"): "converged and checked on sandbox hosts; parsers on its recorded outputs",
    ("debian", "13"): "converged and checked on sandbox hosts; parsers on its recorded outputs",
}

_MAPPING_INDENT = re.compile(r"^[^\s#][^\n]*:[ \t]*\n(?:[ \t]*(?:#[^\n]*)?\n)*( +)[^\s#-]", re.M)


class OnboardError(Exception):
    """A refusal; str() starts with the step that refused (`preflight: ...`). `concern` narrows
    the step (the failed check or converge concern); `advice` says what to fix."""

    def __init__(
        self, step: str, message: str, concern: str | None = None, advice: str | None = None
    ) -> None:
        self.step, self.concern, self.advice = step, concern, advice
        # Messages quote hosts (their errors, GPU names): their control characters escaped.
        super().__init__(step + ": " + visible(message, keep="\n"))

    @property
    def reason(self) -> str:
        """The message's first line, without the step: what the verdict line quotes."""
        first = str(self).split("\n", 1)[0][len(self.step) + 2 :].rstrip(":")
        first = first.removeprefix(f"{self.concern}: ")  # the verdict names it already
        # Each failure said (a `; `-separated list), each within bounds: a host's error line
        # is quoted, not the host's whole output.
        parts = first.split("; ")
        return "; ".join(p if len(p) <= 240 else p[:237] + "..." for p in parts)


@dataclass(frozen=True)
class Check:
    """One line of the preflight report."""

    name: str
    status: Status
    detail: str


@dataclass(frozen=True)
class Request:
    """What the user typed: where the rental is, what to call it, which inventory gets it."""

    address: str  # host, or user@host
    name: str
    inventory: Path
    port: int | None = None
    user: str | None = None
    key: str | None = None
    groups: tuple[str, ...] = ()
    timeout: float = 10.0
    yes: bool = False
    margin: float = DEFAULT_MARGIN

    def command(self) -> str:
        """This onboarding as a command line: what to run again once a failure is fixed."""
        argv = ["gpurig", "onboard", self.address, "--name", self.name]
        argv += ["--inventory", str(self.inventory)]
        for flag, value in (("--port", self.port), ("--user", self.user), ("--key", self.key)):
            if value is not None:
                argv += [flag, str(value)]
        for group in self.groups:
            argv += ["--group", group]
        if self.yes:
            argv.append("--yes")
        if self.timeout != Request.timeout:
            argv += ["--timeout", f"{self.timeout:g}"]
        if self.margin != DEFAULT_MARGIN:
            argv += ["--margin", f"{self.margin * 100:g}"]
        return shlex.join(argv)


def split_address(address: str, user: str | None) -> tuple[str | None, str]:
    """(login, host) from `user@host` or `host` plus --user; the two must not disagree."""
    if "@" not in address:
        return user, address
    login, host = address.rsplit("@", 1)
    if user and user != login:
        raise OnboardError("preflight", f"{address} says user {login}, --user says {user}")
    return login, host


def os_problem(os_id: str | None, version: str | None) -> str | None:
    """Why this /etc/os-release is not one the deploys support, or None when it is."""
    supported = "Debian 11-13 or Ubuntu 20.04-24.04"
    if os_id not in SUPPORTED_OS:
        return f"{os_id or 'an unknown OS'} is not supported (expected {supported})"
    if not version or not re.fullmatch(r"\d+(\.\d+)?", version):
        return f"{os_id} without a release number ({version or 'no VERSION_ID'}) is not supported"
    first, last = SUPPORTED_OS[os_id]
    if not first <= tuple(int(part) for part in version.split(".")) <= last:
        return f"{os_id} {version} is not supported (expected {supported})"
    return None


def render_checks(checks: Sequence[Check]) -> str:
    """The preflight report: one aligned line per check; the host's words shown escaped."""
    width = max((len(c.name) for c in checks), default=0)
    return "".join(f"{c.status:<4}  {c.name:<{width}}  {visible(c.detail)}\n" for c in checks)


def _from_findings(name: str, findings: Sequence[Finding], fine: str) -> Check:
    """A check whose verdict is the worst of drift's findings for it."""
    if not findings:
        return Check(name, "ok", fine)
    status: Status = "FAIL" if any(f.severity == "error" for f in findings) else "warn"
    detail = "; ".join(f"{f.message} (expected {f.expected}, got {f.actual})" for f in findings)
    return Check(name, status, detail)


Reader = Callable[..., Any]


def os_tested(os_id: str | None, version: str | None) -> str | None:
    """How an accepted release is tested (TESTED_OS), or None: accepted but untested."""
    return TESTED_OS.get((os_id or "", version or ""))


def node_python_problem(os_id: str | None, version: str | None, pretty: str) -> str | None:
    """What the release cannot run on the node itself, by its python3 (gpurig/data/
    releases.yaml): the node agent below node_python, the full install (up --local) below
    full_python; None where it runs both, or is not listed."""
    releases = table("releases.yaml")
    found = releases["python3"].get(f"{os_id} {version}")
    agent, full = releases["node_python"], releases["full_python"]
    if found is None or _version(found) >= _version(full):
        return None
    if _version(found) < _version(agent):
        return (f"{pretty}'s python3 is {found}, older than the {agent} gpurig's node agent "
                "needs: the node contracts (drift --local: Prolog, HealthCheckProgram, NPD) "
                "and up --local cannot run there; converge and drift over SSH can")  # fmt: skip
    return (f"{pretty}'s python3 is {found}: the node agent runs there (drift --local: Prolog, "
            f"HealthCheckProgram, NPD), up --local needs the full install's {full}; converge "
            "and drift over SSH can")  # fmt: skip


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def _os(_spec: Mapping[str, Any], read: Reader) -> Check:
    found = read(OsRelease)
    os_id, version = found["os_id"], found["os_version"]
    problem = os_problem(os_id, version)
    if problem:
        return Check("os", "FAIL", problem)
    pretty = str(found["os_pretty"])
    tested = os_tested(os_id, version)
    limit = node_python_problem(os_id, version, pretty)
    if tested is None:
        untested = (f"{pretty}: accepted but untested by gpurig (tested: Debian 11, 12 and 13, "
                    "converged); its packages and tools may differ")  # fmt: skip
        return Check("os", "warn", "; ".join([untested, *([limit] if limit else [])]))
    if limit:
        return Check("os", "warn", f"{pretty} ({tested}); {limit}")
    if version != "12":
        return Check("os", "ok", f"{pretty} ({tested})")
    return Check("os", "ok", pretty)


def _root(spec: Mapping[str, Any], read: Reader, findings: Sequence[Finding]) -> Check:
    """Drift's own host.not_root, refused here: the converge needs root (not scope: user,
    whose login is never asked about sudo)."""
    login = read(Login, sudo=not is_user(spec))
    user = login["user"] or f"uid {login['uid']}"
    if is_user(spec):
        return Check("root", "ok", f"not needed: scope: user acts as {user} alone")
    for f in findings:
        if f.id == "host.not_root":
            return Check("root", "FAIL", f"{f.message}; {f.fix}")
    if login["uid"] == 0:
        return Check("root", "ok", "logged in as root")
    return Check("root", "ok", f"{user} has passwordless sudo")


def _disk(spec: Mapping[str, Any], read: Reader, findings: Sequence[Finding]) -> Check:
    root = next((d for d in read(DiskSpace, paths=disk_paths(spec)) if d["path"] == "/"), {})
    free, total, ifree = (root.get(k) for k in ("free_bytes", "inodes_total", "inodes_free"))
    fine = "/: unknown free space"
    if free is not None and total and ifree is not None:
        fine = f"/ has {format_size(free)} free, {ifree * 100 / total:.0f}% of inodes free"
    return _from_findings("disk", [f for f in findings if f.id.startswith("disk.")], fine)


def _gpu(spec: Mapping[str, Any], read: Reader, findings: Sequence[Finding]) -> Check:
    gpus = read(NvidiaGpus)["gpus"] or []
    if gpus:
        names = sorted({str(g.get("name")) for g in gpus})
        fine = f"{len(gpus)} x {', '.join(names)}, driver {gpus[0].get('driver_version')}"
    else:
        fine = "no GPU"
    relevant = [f for f in findings if f.id.startswith(("gpu.", "compat."))]
    check = _from_findings("gpu", relevant, fine + ("; compat ok" if gpus else ""))
    if check.status == "ok" and not gpus and spec.get("gpu", "auto") == "auto":
        return Check("gpu", "warn", "no GPU found (gpu: auto); is the driver installed?")
    return check


def _engine(spec: Mapping[str, Any], read: Reader) -> Check:
    installed = read(EngineVersions)
    found = "; ".join(f"{tool}: {installed.get(tool) or 'not installed'}" for tool in installed)
    declared = spec.get("engine") or "not declared"
    return Check("engine", "ok", f"{found or 'none found'}; declared: {declared}")


def _cgroup(spec: Mapping[str, Any], read: Reader) -> Check:
    memory, cpus = read(CgroupMemory)["limit"], read(CpuQuota)["cpus"]
    # cgroup v1 says "no limit" as a huge page-rounded number (and a quota of -1: no `cpus`).
    limits = [f"memory {format_size(memory)}"] if memory is not None and memory < 2**62 else []
    if cpus is not None:
        limits.append(counted(cpus, "CPU"))
    if not limits:
        return Check("cgroup", "ok", "no memory or CPU limit on this login's cgroup")
    detail = f"limited to {', '.join(limits)}"
    if spec.get("engine") in ("docker", "podman"):
        return Check(
            "cgroup", "warn", f"{detail}: the host may itself be a container (use engine: none)"
        )
    return Check("cgroup", "ok", detail)


def host_checks(host: Host, read: Reader) -> list[Check]:
    """Judge a new host through `read`: OS, root, headroom, GPU and compat, engine, cgroup
    limits. A check whose facts the host's output made unreadable fails, saying so.

    Headroom, GPU and compat verdicts are drift's own checks (gpurig.checks.all) on the spec as
    the inventory loaded it, defaults included (no default of onboarding's own), so onboarding
    and the daily drift check cannot disagree; the rest is what only a new host needs. Every
    read is made whatever was read before, so recording this lists all it needs
    (`preflight_reads`).
    """
    spec = host.spec
    findings = check(spec, read)
    judges: list[tuple[str, Callable[[], Check]]] = [
        ("os", lambda: _os(spec, read)),
        ("root", lambda: _root(spec, read, findings)),
        ("disk", lambda: _disk(spec, read, findings)),
        ("gpu", lambda: _gpu(spec, read, findings)),
        ("engine", lambda: _engine(spec, read)),
        ("cgroup", lambda: _cgroup(spec, read)),
    ]
    checks = []
    for name, judge in judges:
        try:
            checks.append(judge())
        except ODD_OUTPUT as exc:
            checks.append(Check(name, "FAIL", f"the host's output could not be read: {exc}"))
    return checks


# What to fix when a preflight check fails, for the verdict line (default: "fix that").
ADVICE = {
    "sources": "fix the host's network or its sources (apt lists, the spec's URLs)",
    "root": "log in as root or give the login passwordless sudo",
    "disk": "free space on the host or lower `checks` in the spec",
    "os": "onboard a host with a supported OS",
}


def preflight_reads(host: Host) -> list[Read]:
    """What `host_checks` reads, and the host's apt sources: one round trip."""
    return [*required_reads(lambda read: host_checks(host, read)), (AptSources, {})]


def sources_check(state: Mapping[str, Any], timeout: float) -> Check:
    """Whether the host reached every source its spec needs (state["sources"], from _reach)."""
    found = state.get("sources") or {}
    if "error" in found:
        return Check("sources", "warn", f"apt sources not checked: {found['error']}")
    results, needed = found.get("results") or {}, found.get("needed") or []
    failed = [
        f"cannot reach {s.what} ({s.concern}) at {s.endpoint}: {results[str(s.endpoint)]}"
        for s in needed
        if results.get(str(s.endpoint), "not tried")
    ]
    skipped = found.get("skipped") or []
    if failed:
        return Check("sources", "FAIL", "; ".join(failed + skipped))
    if skipped:
        return Check("sources", "warn", "not checked: " + "; ".join(skipped))
    if not needed:
        return Check("sources", "ok", "nothing to fetch for this spec")
    reached = ", ".join(str(e) for e in sources.by_endpoint(needed))
    return Check("sources", "ok", f"reached within {timeout:g} s: {reached}")


def _reach(spec: Mapping[str, Any], timeout: float) -> Then:
    """After the first read, on the same connection: try every endpoint the spec needs."""

    def then(pyinfra_host: Any, state: dict[str, Any]) -> dict[str, Any]:
        try:
            apt = Snapshot(state)(AptSources)
        except Unreadable as exc:
            return {**state, "sources": {"error": str(exc)}}
        needed, skipped = sources.needed(spec, apt["files"], apt["proxies"])
        targets = [(e.host, e.port) for e in sources.by_endpoint(needed)]
        results = {}
        if targets:
            results = pyinfra_host.get_fact(
                Reach, targets=targets, timeout=timeout, _sudo=False, _timeout=int(timeout) + 30
            )
        found = {"needed": needed, "skipped": skipped, "results": results}
        return {**state, "sources": found}

    return then


def _yaml(text: str) -> YAML:
    """A round-trip YAML that writes this file's own indentation back, and never re-wraps."""
    _, sequence, offset = load_yaml_guess_indent(text)
    mapping = _MAPPING_INDENT.search(text)
    yaml = YAML(typ="rt")
    yaml.preserve_quotes = True
    yaml.width = 4096
    yaml.indent(mapping=len(mapping.group(1)) if mapping else 2, sequence=sequence, offset=offset)
    return yaml


def edit_inventory(
    text: str, name: str, address: str, ssh: Mapping[str, Any], groups: Sequence[str]
) -> str:
    """`text` with host `name` added, or its address, ssh keys and groups updated; the rest
    (comments, order, quoting, indentation) kept. Groups are replaced only when given."""
    yaml = _yaml(text)
    doc = yaml.load(text)
    hosts = doc.get("hosts")
    if not isinstance(hosts, CommentedMap):
        hosts = doc["hosts"] = CommentedMap()
    hosts.fa.set_block_style()  # a `hosts: {}` to start from grows as a block
    entry = hosts.get(name)
    if not isinstance(entry, CommentedMap):
        entry = hosts[name] = CommentedMap()
    entry["address"] = address
    if not isinstance(entry.get("ssh"), CommentedMap):
        entry["ssh"] = CommentedMap()
    for key, value in ssh.items():
        entry["ssh"][key] = DoubleQuotedScalarString(value) if key == "host_key" else value
    if groups:
        listed = CommentedSeq(groups)
        listed.fa.set_flow_style()
        entry["groups"] = listed
    out = io.StringIO()
    yaml.dump(doc, out)
    return out.getvalue()


def _candidate(request: Request, text: str, address: str, ssh: Mapping[str, Any]) -> Host:
    """The host as the edited inventory would define it: merged with defaults and groups."""
    edited = edit_inventory(text, request.name, address, ssh, request.groups)
    try:
        inventory = load_inventory_text(edited, str(request.inventory))
    except InventoryError as exc:
        raise OnboardError("preflight", f"the new entry would not validate:\n{exc}") from None
    return next(h for h in inventory.hosts if h.name == request.name)


def _hop(host: Host) -> str:
    jump = host.ssh.jump
    return endpoint(jump.address, jump.port) if jump else ""


def _fetch_key(host: Host, timeout: float, prefer: str | None) -> str:
    """The host's key, read directly or through its login node (whose key must be the
    pinned one); ConnectError from the login node, else what fetch_host_key raises."""
    if host.ssh.jump is None:
        return fetch_host_key(host.address, host.ssh.port, timeout, prefer=prefer)
    with LOGINS.channel(jump_data(host.ssh.jump), host.address, host.ssh.port, timeout) as sock:
        return fetch_host_key(host.address, host.ssh.port, timeout, prefer=prefer, sock=sock)


def _trust_host_key(
    request: Request, host: Host, recorded: Host | None, confirm: Callable[[str], bool]
) -> tuple[str, str]:
    """The host key to record and a report line; refuses a changed one outright."""
    expected = recorded.ssh.host_key if recorded else None
    try:
        got = _fetch_key(host, request.timeout, expected.split()[0] if expected else None)
    except ConnectError as exc:  # from the login node: its messages name it
        jump = refused_jump(str(exc))
        message = changed_message(request.name, host.source, jump) if jump else str(exc)
        raise OnboardError("preflight", message) from None
    except (OSError, EOFError, paramiko.SSHException) as exc:
        through = f" through login node {_hop(host)}" if host.ssh.jump else ""
        raise OnboardError(
            "preflight",
            f"cannot reach SSH at {host.address}:{host.ssh.port}{through} within "
            f"{request.timeout:g} s: {exc or type(exc).__name__}",
        ) from None
    shown = f"{got.split()[0]} key fingerprint is {fingerprint(got)}"
    if expected and expected.split() != got.split():
        assert recorded is not None
        raise OnboardError("preflight", changed_message(recorded.name, recorded.source))
    if recorded and recorded.name != request.name:
        raise OnboardError(
            "preflight", f"{host.address}:{host.ssh.port} is already recorded as {recorded.name}"
        )
    if expected:
        return got, f"{shown}, as recorded"
    question = f"{host.address}:{host.ssh.port}: {shown}. Trust it and record it?"
    if not (request.yes or confirm(question)):
        raise OnboardError("preflight", "host key not accepted; nothing was written")
    return got, f"{shown}, trusted on first use"


def preflight(
    request: Request, confirm: Callable[[str], bool], echo: Callable[[str], None]
) -> tuple[bytes, str, Host]:
    """Read-only checks; (the inventory's bytes now, its edited text, the new host)."""
    path = request.inventory
    try:
        current = load_inventory([path])  # first: it refuses a FIFO or a device unread
        original = read_bytes(path)
    except YamlRefused as exc:
        raise OnboardError("preflight", f"{path}: {exc.message}") from None
    except InventoryError as exc:
        raise OnboardError("preflight", f"{path} is not valid:\n{exc}") from None
    text = original.decode("utf-8")
    login, address = split_address(request.address, request.user)
    key = request.key and home_relative(request.key, str(Path.home()))
    given = {"port": request.port, "user": login, "key": key}
    ssh = {k: v for k, v in given.items() if v is not None}
    host = _candidate(request, text, address, ssh)
    # The same address behind another login node is another machine.
    where = (address, host.ssh.port, _hop(host))
    recorded = next((h for h in current.hosts if h.name == request.name), None) or next(
        (h for h in current.hosts if (h.address, h.ssh.port, _hop(h)) == where), None
    )
    refuse_unloadable([host])  # before the host is contacted (its host key read)
    host_key, line = _trust_host_key(request, host, recorded, confirm)
    checks = [Check("ssh", "ok", line)]
    ssh = {"port": host.ssh.port, **ssh, "host_key": host_key}
    edited = edit_inventory(text, request.name, address, ssh, request.groups)
    host = _candidate(request, text, address, ssh)
    # As the login itself (no sudo), so the read can say whether that login can become root.
    reach = _reach(host.spec, request.timeout)
    reads = preflight_reads(host)
    [result] = probe_hosts([host], cache_dir(), sudo=False, reads=lambda _: reads, then=reach)
    if result.connect_error is not None:
        if is_mismatch(result.connect_error):
            jump = refused_jump(result.connect_error)
            raise OnboardError("preflight", changed_message(host.name, str(path), jump))
        login_as = f"{host.ssh.user or '(ssh default user)'}@{host.address}:{host.ssh.port}"
        with_key = f" with {host.ssh.key}" if host.ssh.key else ""
        no_key = "" if host.ssh.key else " (no key given: name the private key with --key FILE)"
        raise OnboardError(
            "preflight", f"cannot log in as {login_as}{with_key}: {result.connect_error}{no_key}"
        )
    values = result.state or {}
    read = Snapshot(values)
    if not read.holds(Login, {}):
        raise OnboardError("preflight", "the host printed nothing (timeout, or a shell error)")
    checks += [Check("login", "ok", f"{host.ssh.user or 'default user'}@{host.address}")]
    checks += host_checks(host, read)
    checks.append(sources_check(values, request.timeout))
    echo(render_checks(checks).rstrip("\n"))
    failed = [c for c in checks if c.status == "FAIL"]
    if failed:
        raise preflight_refused(failed)
    return original, edited, host


def preflight_refused(failed: Sequence[Check]) -> OnboardError:
    """The refusal for the failed preflight checks: one names its concern and its fix; several
    are each listed with their own fix, none cut."""
    if len(failed) == 1:
        [check] = failed
        return OnboardError("preflight", f"{check.name}: {check.detail}", check.name,
                            ADVICE.get(check.name))  # fmt: skip
    message = "; ".join(
        f"{c.name}: {c.detail}" + (f" (fix: {ADVICE[c.name]})" if c.name in ADVICE else "")
        for c in failed
    )
    return OnboardError("preflight", message, None, "fix each as said")


def record(path: Path, original: bytes, text: str) -> None:
    """Write the edited inventory atomically and validate the file; restore it if invalid."""
    try:
        now = read_bytes(path)
    except YamlRefused as exc:
        raise OnboardError("record", f"{path}: {exc.message}") from None
    if now != original:
        raise OnboardError("record", f"{path} changed while onboarding; run onboard again")
    mode = stat.S_IMODE(path.stat().st_mode)
    atomic_write(path, text, mode)
    try:
        load_inventory([path])
    except InventoryError as exc:
        atomic_write(path, original, mode)
        raise OnboardError("record", f"{path} did not validate and was restored:\n{exc}") from None


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
# A line of a failed command's output that says what went wrong (apt, git, docker, sh).
_ERROR_LINE = re.compile(r"^(E: |fatal: |error: |Error response from daemon|.*: not found$)")


_OP_START = re.compile(r"^--> Starting operation: (.+?)\s*$")


def failed_operation(log: str, name: str) -> tuple[str | None, list[str]]:
    """The operation during which pyinfra's log says host `name` failed (`[name] Error...`),
    and the lines the host printed in it; (None, []) when no operation failed there."""
    prefix = f"[{name}] "
    operation, lines = None, []
    for raw in log.splitlines():
        line = _ANSI.sub("", raw).strip()
        started = _OP_START.match(line)
        if started:
            operation, lines = started.group(1), []
        elif line.startswith(prefix):
            lines.append(line[len(prefix) :].strip())
            if lines[-1].startswith("Error"):
                return operation, lines
    return None, []


def failure_reason(lines: list[str]) -> str:
    """The line of a failed operation's output that says why: the last error-shaped line,
    else the last line that is not pyinfra's own `Error: ...` summary."""
    errors = [line for line in lines if _ERROR_LINE.match(line)]
    if errors:
        return errors[-1]
    own = [line for line in lines if not line.startswith(("Error", ">>>"))]
    return own[-1] if own else "no output"


def summarise(
    result: ConvergeResult, name: str, log: Path
) -> tuple[list[str], tuple[str | None, str] | None]:
    """Report lines per concern (the deploy an operation belongs to: `Packages | Install
    tmux`), and (concern, why) when the converge failed. Changes come from pyinfra's JSON;
    the failure from its log, since pyinfra prints no JSON once its last host has failed."""
    changed: dict[str, list[str]] = {}
    for op, hosts in result.changed.items():
        if name in hosts:
            concern, _, what = op.partition(" | ")
            changed.setdefault(concern, []).append(what or concern)
    lines = [f"  {concern}: changed {', '.join(ops)}" for concern, ops in changed.items()]
    if result.returncode == 0:
        return [*lines, f"  full log: {log}"], None
    operation, output = failed_operation(result.stderr, name)
    if operation is not None:
        concern, _, what = operation.partition(" | ")
        why = failure_reason(output)
        lines.append(f"  {concern}: FAILED {what or concern}: {visible(why)}")
        return [*lines, f"  full log: {log}"], (concern, why)
    tail = [_ANSI.sub("", x).strip() for x in result.stderr.strip().splitlines()[-3:]]
    why = "; ".join(result.messages) or (tail[-1] if tail else "pyinfra failed")
    return [*lines, f"  full log: {log}"], (None, why.removeprefix("--> "))


def write_log(name: str, result: ConvergeResult) -> Path:
    """pyinfra's whole output for this converge, kept under the user's state directory."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    safe = re.sub(r"[^A-Za-z0-9_.-]", "_", name)
    path = xdg_dir("XDG_STATE_HOME", ".local/state", "logs") / f"onboard-{safe}-{stamp}.log"
    atomic_write(path, f"{result.stderr}\n--- pyinfra --json ---\n{result.stdout}", 0o600)
    return path


def failure_verdict(exc: OnboardError, request: Request) -> str:
    """The one line a failed onboarding ends with: step, why, what to fix, what to run."""
    where = f"{exc.step} ({exc.concern})" if exc.concern else exc.step
    inventory = shlex.quote(str(request.inventory))
    name = shlex.quote(request.name)
    following = {
        "verify": f"gpurig drift {inventory} --limit {name}",
        "accept": f"gpurig accept {name} --inventory {inventory}",
    }.get(exc.step, request.command())
    advice = exc.advice or "fix that"
    if exc.step in ("converge", "verify", "accept"):
        advice += f" ({request.name} is recorded in {request.inventory})"
    return visible(f"onboard failed at {where}: {exc.reason}; {advice}, then: {following}")


@dataclass(frozen=True)
class Onboarded:
    """What a successful onboarding did: the verified report and the acceptance."""

    report: HostReport
    changes: int
    accepted: accept.Accepted


def changes(count: int) -> str:
    return counted(count, "change")


def success_verdict(done: Onboarded, request: Request) -> str:
    """The one line a successful onboarding ends with."""
    inventory, name = shlex.quote(str(request.inventory)), shlex.quote(request.name)
    return visible(
        f"onboard ok: {request.name} converged ({changes(done.changes)}), drift clean, "
        f"acceptance {done.accepted.verdict.status}; next: gpurig drift {inventory} --limit {name}"
    )


def onboard(
    request: Request, confirm: Callable[[str], bool], echo: Callable[[str], None]
) -> Onboarded:
    """Preflight, record, converge, verify, accept; raises OnboardError naming the step."""
    original, edited, host = preflight(request, confirm, echo)
    path = request.inventory.resolve()  # pyinfra runs from the repository root
    record(path, original, edited)
    echo(f"record: {request.name} written to {request.inventory}")
    result = converge([path], limit=[request.name])
    log = write_log(request.name, result)
    lines, failure = summarise(result, request.name, log)
    echo(f"converge: {'failed' if failure else changes(result.change_count)}")
    echo("\n".join(lines))
    if failure is not None:
        concern, why = failure
        raise OnboardError("converge", why, concern, "fix that on the host or in the spec")
    [report] = run_drift([host], cache_dir())
    if report.failed:
        raise OnboardError(
            "verify", f"drift is not clean:\n{to_table([report])}", advice="see each finding's fix"
        )
    echo("verify: drift clean")
    accepted = accept.measure(host, cache_dir(), request.margin)
    saved = accept.save(host, accepted)
    echo(f"accept: {accept.summary(accepted)}\n  recorded in {saved}")
    if accepted.failed:
        raise OnboardError(
            "accept",
            accept.summary(accepted),
            "gpu",
            "a GPU below its baseline or failing diagnostics: send these figures to the provider, "
            "or judge with another --margin",
        )
    return Onboarded(report, result.change_count, accepted)
