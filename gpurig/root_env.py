"""What root's children start with: an environment built from an allow-list, never the
caller's less a deny-list. `sudo` keeps SUDO_UID; a caller's BROWSER with PYTHONWARNINGS, or
GCONV_PATH, APT_CONFIG, PERL5OPT, PIP_CONFIG_FILE, UV_CONFIG_FILE, each ran or steered a program
of another account's as uid 0 once. Only the system's PATH, root's HOME, the locale, time zone
and terminal pass (and the few names gpurig reads itself, each checked where it is used)."""

from __future__ import annotations

import os

TYPE_CHECKING = False  # typing is not loaded before a contract's read starts
if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping

# Root runs the system's own tools: no PATH entry another account could write (a SLURM prolog
# has no PATH at all; a login's PATH may hold a user's directory).
ROOT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Names that only say how to print (LC_* too).
KEPT = frozenset(("LANG", "LANGUAGE", "TZ", "TERM"))
# What gpurig reads itself on a node: what slurmd says of the node and the script's context,
# (a node contract's only) where it keeps its copies, walked as root before any use
# (gpurig.spec.runtime), and the documentation's address a report links to, checked before
# any host is read (gpurig.report.docs_url; only ever written into the report).
SLURM_OWN = ("SLURMD_NODENAME", "SLURM_SCRIPT_CONTEXT")
OWN = ("GPURIG_RUNTIME_DIR", "GPURIG_DOCS_URL", *SLURM_OWN)


def allowed(environ: Mapping[str, str], home: str, own: Iterable[str] = ()) -> dict[str, str]:
    """The environment root's children get: `environ`'s locale, time zone and terminal, the
    names in `own`, the system's PATH and `home`."""
    named = frozenset(own)
    env = {
        key: value
        for key, value in environ.items()
        if key in KEPT or key in named or key.startswith("LC_")
    }
    env["PATH"] = ROOT_PATH
    env["HOME"] = home
    return env


def scrub() -> None:
    """As root, replace this process's environment with the allow-list (root's own HOME), so
    that every child it starts (a read, scontrol, an import check, a converge) starts from
    nothing of the caller's. Another account keeps its own: its children are its own."""
    if os.geteuid() != 0:
        return
    import pwd

    env = allowed(os.environ, pwd.getpwuid(0).pw_dir, OWN)
    os.environ.clear()
    os.environ.update(env)
