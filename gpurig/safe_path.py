"""The path root may act on: the declared path walked from `/` one component at a time, never
resolved first. A link is followed where it sits (its target walked in turn), and the walk
records who could change each thing it met: the owner of every directory and of the thing
itself, and the owner of a link or entry in a sticky directory. Root acts on the result only
where nobody else could change any of it, and then on `checked`, the path as walked (every
directory in it root's alone, so no one can re-point it between the check and the act); where
one other account could, that account acts itself, on the declared path (its own permissions
resolve it: it gets nothing it could not reach anyway); otherwise nobody acts.

facts/safe_path.sh is the same walk in POSIX shell, for the commands that run on a host;
tests/unit/test_safe_path.py holds the two to the same verdicts on the same trees."""

from __future__ import annotations

import os
import stat

from gpurig.named_tuple import NamedTuple

# Links followed in one walk before it gives up, as the kernel's own bound (ELOOP).
MAX_LINKS = 40


class Walk(NamedTuple):
    """A walk's verdict. `checked`: the path as walked, every link resolved (a part that does
    not exist yet kept as declared); `held`: the same but for the last component, kept as
    named (a venv's `bin/python` link, which must be run by that name); `owner`: the one
    account other than root that could change it (None: root alone); `refused`: why nobody
    may act (several accounts, a group or everyone may write, a loop, a stat that failed)."""

    checked: str
    held: str
    owner: int | None
    refused: str | None

    @property
    def root_only(self) -> bool:
        return self.owner is None and self.refused is None


class _Refused(Exception):
    pass


def _join(at: str, name: str) -> str:
    return f"/{name}" if at == "/" else f"{at}/{name}"


def _writable(mode: int) -> bool:
    return bool(mode & 0o022)


def walk(path: str) -> Walk:
    """Walk `path` as root would act on it (see the module's docstring)."""
    owner: list[int] = []

    def owned_by(uid: int, what: str) -> None:
        if uid != 0 and uid not in owner:
            owner.append(uid)
            if len(owner) > 1:
                raise _Refused(f"several accounts (uids {owner[0]} and {uid}) can change {what}")

    if not path.startswith("/"):
        return Walk(path, path, None, f"not an absolute path: {path}")
    at, rest, held, links = "/", path.split("/"), None, 0
    try:
        info = _lstat(at)
        owned_by(info.st_uid, at)
        while True:
            while rest and rest[0] in ("", "."):
                rest.pop(0)
            if not rest:
                break
            name = rest.pop(0)
            if name == "..":
                at = at.rsplit("/", 1)[0] or "/"
                info = _lstat(at)
                continue
            last = held is None and all(part in ("", ".") for part in rest)
            sticky = bool(info.st_mode & stat.S_ISVTX)
            if _writable(info.st_mode) and not sticky:
                raise _Refused(f"a group or other accounts may write {at}")
            entry = _join(at, name)
            if last:
                held = entry
            try:
                found = os.lstat(entry)
            except FileNotFoundError:
                if _writable(info.st_mode):
                    raise _Refused(f"other accounts may write {at}") from None
                checked = _join(at, "/".join(part for part in [name, *rest] if part))
                return Walk(checked, held or checked, _one(owner), None)
            except OSError:
                raise _Refused(f"cannot stat {entry}") from None
            if sticky:
                owned_by(found.st_uid, entry)
            if stat.S_ISLNK(found.st_mode):
                links += 1
                if links > MAX_LINKS:
                    raise _Refused(f"more than {MAX_LINKS} links in {path}")
                target = os.readlink(entry)
                if target.startswith("/"):
                    at, info = "/", _lstat("/")
                rest = [*target.split("/"), *rest]
                continue
            owned_by(found.st_uid, entry)
            if not stat.S_ISDIR(found.st_mode):
                if rest and any(part not in ("", ".") for part in rest):
                    raise _Refused(f"{entry} is not a directory")
                if _writable(found.st_mode):
                    raise _Refused(f"a group or other accounts may write {entry}")
                return Walk(entry, held or entry, _one(owner), None)
            at, info = entry, found
        if _writable(info.st_mode):
            sticky = info.st_mode & stat.S_ISVTX
            who = "other accounts" if sticky else "a group or other accounts"
            raise _Refused(f"{who} may write {at}")
        return Walk(at, held or at, _one(owner), None)
    except _Refused as why:
        return Walk(path, path, _one(owner), str(why))


def _one(owner: list[int]) -> int | None:
    return owner[0] if owner else None


def _lstat(path: str) -> os.stat_result:
    try:
        return os.lstat(path)
    except OSError:
        raise _Refused(f"cannot stat {path}") from None
