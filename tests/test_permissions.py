"""Whether another user reaches a path (base/permissions.py), worked out in this process: the
owner's, the group's and the others' bits, POSIX access ACLs (a named user or group, the mask),
symbolic links followed where they stand. Each case is a real tree (modes and owners set,
ACLs written as the kernel takes them, which it checks); the kernel's own answer, by a process
of those ids (`test -r` or `test -x`), is held against the suite's for every case.

Needs root: the trees belong to other users.
"""

from __future__ import annotations

import errno
import os
import struct
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from base.permissions import READ, SEARCH, Ids, first_closed
from base.process import SETPRIV

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="the trees belong to other users")

# The ids asked about: no account needs to exist for them.
UID, GID, SECOND_GROUP, STRANGER = 4242, 4243, 4244, 4250
IDS = Ids(UID, (GID, SECOND_GROUP))

# ACL tags (include/uapi/linux/posix_acl.h) and the xattr's version.
USER_OBJ, USER, GROUP_OBJ, GROUP, MASK, OTHER = 0x01, 0x02, 0x04, 0x08, 0x10, 0x20
NO_ID = 0xFFFFFFFF


def set_acl(path: Path, *, users: dict[int, int] | None = None,
            groups: dict[int, int] | None = None, mask: int | None = None) -> None:
    """path's access ACL: its mode's owner, group and others' bits, the named users' and
    groups' entries, and the mask (default: the union of the group class)."""
    mode = path.stat().st_mode
    users, groups = users or {}, groups or {}
    group_class = (mode >> 3) & 7
    for perms in (*users.values(), *groups.values()):
        group_class |= perms
    entries = [(USER_OBJ, (mode >> 6) & 7, NO_ID),
               *((USER, perms, uid) for uid, perms in sorted(users.items())),
               (GROUP_OBJ, (mode >> 3) & 7, NO_ID),
               *((GROUP, perms, gid) for gid, perms in sorted(groups.items())),
               (MASK, group_class if mask is None else mask, NO_ID),
               (OTHER, mode & 7, NO_ID)]
    os.setxattr(path, "system.posix_acl_access",
                struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries))


def directory(parent: Path, name: str, mode: int, owner: tuple[int, int] = (0, 0)) -> Path:
    path = parent / name
    path.mkdir()
    os.chown(path, *owner)
    path.chmod(mode)
    return path


def a_file(parent: Path, mode: int = 0o644) -> Path:
    """parent/file, of mode (default: anyone may read it)."""
    path = parent / "file"
    path.write_text("x\n")
    path.chmod(mode)
    return path


@dataclass(frozen=True)
class Case:
    """A tree under an open directory: the path asked about, and where it is shut (None:
    reached)."""

    build: Callable[[Path], tuple[Path, Path | None]]
    want: int = READ


def _behind(mode: int, owner: tuple[int, int] = (0, 0), *,
            users: dict[int, int] | None = None, groups: dict[int, int] | None = None,
            mask: int | None = None) -> Callable[[Path], tuple[Path, Path | None]]:
    """A readable file in directory d of mode and owner (and an ACL with users, groups and
    mask), expected shut at d."""
    def build(top: Path) -> tuple[Path, Path | None]:
        d = directory(top, "d", mode, owner)
        if users or groups or mask is not None:
            set_acl(d, users=users, groups=groups, mask=mask)
        return a_file(d), d
    return build


def _opened(build: Callable[[Path], tuple[Path, Path | None]]
            ) -> Callable[[Path], tuple[Path, Path | None]]:
    """The same tree, expected reached."""
    return lambda top: (build(top)[0], None)


def _file_of_mode(mode: int, owner: tuple[int, int]) -> Callable[[Path], tuple[Path, Path | None]]:
    def build(top: Path) -> tuple[Path, Path | None]:
        path = a_file(top, mode)
        os.chown(path, *owner)
        return path, path
    return build


def _link_into_a_closed_directory(top: Path) -> tuple[Path, Path | None]:
    """open/link -> ../closed/inner: the target's directory shuts it."""
    closed = directory(top, "closed", 0o700)
    inner = directory(closed, "inner", 0o755)
    a_file(inner)
    (directory(top, "open", 0o755) / "link").symlink_to("../closed/inner")
    return top / "open" / "link" / "file", closed


def _link_in_a_closed_directory(top: Path) -> tuple[Path, Path | None]:
    """closed/link -> an open directory: the link's own directory shuts it."""
    a_file(directory(top, "open", 0o755))
    closed = directory(top, "closed", 0o700)
    (closed / "link").symlink_to(top / "open")
    return closed / "link" / "file", closed


def _links_through_links(top: Path) -> tuple[Path, Path | None]:
    """a/l1 -> ../b/l2/x, b/l2 -> ../c: b is searched on the way though neither a's path nor
    the real one passes it."""
    c = directory(top, "c", 0o755)
    a_file(directory(c, "x", 0o755))
    b = directory(top, "b", 0o700)
    (b / "l2").symlink_to("../c")
    (directory(top, "a", 0o755) / "l1").symlink_to("../b/l2/x")
    return top / "a" / "l1" / "file", b


CASES = {
    "others may search": Case(_opened(_behind(0o701))),
    "others may not": Case(_behind(0o750)),
    "the owner's bits": Case(_opened(_behind(0o100, (UID, 0)))),
    "the owner's bits, not the others'": Case(_behind(0o071, (UID, 0))),
    "the group's bits": Case(_opened(_behind(0o010, (0, SECOND_GROUP)))),
    "the group's bits, not the others'": Case(_behind(0o701, (0, GID))),
    "another group's bits": Case(_behind(0o070, (0, STRANGER))),
    "a named user": Case(_opened(_behind(0o700, users={UID: 1}))),
    "a named user's entry, not the others'": Case(_behind(0o701, users={UID: 6})),
    "a named user under the mask": Case(_behind(0o700, users={UID: 1}, mask=4)),
    "a mask of nothing: the mode's bits": Case(_opened(_behind(0o701, users={UID: 1}, mask=0))),
    "a named group": Case(_opened(_behind(0o700, groups={SECOND_GROUP: 1}))),
    "a named group that denies, not the others'": Case(
        _behind(0o701, groups={SECOND_GROUP: 4, STRANGER: 1})),
    "one of two named groups grants": Case(
        _opened(_behind(0o700, groups={GID: 4, SECOND_GROUP: 1}))),
    "the owning group by the ACL": Case(_opened(_behind(0o710, (0, GID), users={STRANGER: 7}))),
    "a named user who owns it: the owner's bits": Case(_behind(0o001, (UID, 0), users={UID: 7})),
    "a file only its owner reads": Case(_file_of_mode(0o600, (0, 0))),
    "a file the group reads": Case(_opened(_file_of_mode(0o640, (0, GID)))),
    "a directory searched, not read": Case(
        lambda top: (directory(top, "d", 0o711), None), want=SEARCH),
    "a link into a closed directory": Case(_link_into_a_closed_directory),
    "a link in a closed directory": Case(_link_in_a_closed_directory),
    "links through links": Case(_links_through_links),
}


def _tree(tmp_path: Path, case: Case) -> tuple[Path, Path | None]:
    top = directory(tmp_path, "top", 0o755)
    return case.build(top)


@pytest.mark.check
@pytest.mark.parametrize("name", CASES)
def test_the_first_place_that_shuts_the_user_out(name: str, tmp_path: Path) -> None:
    path, closed = _tree(tmp_path, CASES[name])
    assert first_closed(path, IDS, CASES[name].want) == closed


@pytest.mark.parametrize("name", CASES)
def test_the_kernel_agrees(name: str, tmp_path: Path) -> None:
    path, _ = _tree(tmp_path, CASES[name])
    test = "-r" if CASES[name].want == READ else "-x"
    kernel = subprocess.run([SETPRIV, f"--reuid={UID}", f"--regid={GID}",
                             f"--groups={','.join(map(str, IDS.groups))}", "--",
                             "/usr/bin/test", test, str(path)], check=False).returncode == 0
    assert kernel == (first_closed(path, IDS, CASES[name].want) is None)


@pytest.mark.check
@pytest.mark.parametrize("make, code", [
    (lambda top: top / "missing" / "file", errno.ENOENT),
    (lambda top: _loop(top) / "file", errno.ELOOP),
])
def test_a_path_that_leads_nowhere_is_an_os_error(make: Callable[[Path], Path], code: int,
                                                  tmp_path: Path) -> None:
    with pytest.raises(OSError) as caught:
        first_closed(make(tmp_path), IDS, READ)
    assert caught.value.errno == code


def _loop(top: Path) -> Path:
    (top / "a").symlink_to("b")
    (top / "b").symlink_to("a")
    return top / "a"
