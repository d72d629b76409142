"""Whether another user may reach a path: the kernel's own rule, worked out in this process.

The suite, run as root, asks whether the servers' user may search the directories above a
run directory and read a file a server is to read, before any server starts there. Asking by
a process of that user (`test -x` run as it) costs a process per path; changing this
process's effective ids would change them for every thread at once. So the answer is read
from the files' metadata instead, as the kernel decides a lookup (fs/namei.c, fs/posix_acl.c):
the owner's mode bits for the owner, else the POSIX access ACL where the file has one, else
the group's bits for a member of the file's group, else the others'. A user other than root
holds no capability that would override them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH).
"""

from __future__ import annotations

import errno
import os
import stat
import struct
from collections.abc import Collection
from dataclasses import dataclass
from pathlib import Path

READ = 4
SEARCH = 1  # a directory's execute bit

# The kernel follows at most this many symbolic links in one lookup (MAXSYMLINKS).
_MAX_SYMLINKS = 40

# The access ACL as the kernel stores it (include/uapi/linux/posix_acl_xattr.h): a version,
# then (tag, permissions, id) entries sorted by tag, all little-endian.
_ACL_XATTR = "system.posix_acl_access"
_ACL_VERSION = 2
_ACL_HEADER = struct.Struct("<I")
_ACL_ENTRY = struct.Struct("<HHI")
_USER, _GROUP_OBJ, _GROUP, _MASK, _OTHER = 0x02, 0x04, 0x08, 0x10, 0x20


@dataclass(frozen=True)
class Ids:
    """Whom a process runs as: its user id and every group it holds (its own included)."""

    uid: int
    groups: Collection[int]


def first_closed(path: Path, ids: Ids, want: int) -> Path | None:
    """The first place on the way to path (a directory searched on the way, from the root
    down, symbolic links followed where they stand; then where path leads) that shuts `ids`
    out: a directory they may not search, or path's own file without the `want` permission
    (READ, SEARCH); None when they reach it. An OSError for a path that does not lead
    anywhere (ENOENT, ELOOP)."""
    directories, reached = lookup(path)
    closed = next((d for d in directories if not permits(d, ids, SEARCH)), None)
    if closed is not None:
        return closed
    return None if permits(reached, ids, want) else reached


def lookup(path: Path) -> tuple[list[Path], Path]:
    """The directories the kernel searches to reach path, each once, in order, and the real
    path it reaches: each component looked up in the directory reached so far, a symbolic
    link replaced by its target there."""
    here, searched, links = Path("/"), [], 0
    names = list(reversed(path.absolute().parts[1:]))
    while names:
        name = names.pop()
        searched.append(here)
        step = here.parent if name == ".." else here / name
        if not step.is_symlink():
            here = step
            continue
        links += 1
        if links > _MAX_SYMLINKS:
            raise OSError(errno.ELOOP, os.strerror(errno.ELOOP), str(path))
        target = Path(os.readlink(step))
        if target.is_absolute():
            here, target = Path("/"), target.relative_to("/")
        names += reversed(target.parts)
    if not here.exists():
        raise OSError(errno.ENOENT, os.strerror(errno.ENOENT), str(path))
    return list(dict.fromkeys(searched)), here


def permits(path: Path, ids: Ids, want: int) -> bool:
    """Whether ids hold every permission bit in `want` on path (no symbolic link)."""
    info = path.stat()
    if info.st_uid == ids.uid:
        return _holds(info.st_mode >> 6, want)
    # The kernel reads the ACL only while the group bits (the ACL's mask) grant anything:
    # with none, a user the ACL names falls to the mode's bits like anyone else.
    acl = access_acl(path) if info.st_mode & stat.S_IRWXG else []
    if acl:
        return _acl_permits(acl, info.st_gid, ids, want)
    if info.st_gid in ids.groups:
        return _holds(info.st_mode >> 3, want)
    return _holds(info.st_mode, want)


def access_acl(path: Path) -> list[tuple[int, int, int]]:
    """path's access ACL as (tag, permissions, id) entries; none when it has only its mode
    (or its file system keeps no ACLs)."""
    try:
        raw = os.getxattr(path, _ACL_XATTR)
    except OSError as exc:
        if exc.errno in (errno.ENODATA, errno.EOPNOTSUPP):
            return []
        raise
    (version,) = _ACL_HEADER.unpack_from(raw)
    if version != _ACL_VERSION:
        raise OSError(errno.EINVAL, f"unknown ACL version {version}", str(path))
    return list(_ACL_ENTRY.iter_unpack(raw[_ACL_HEADER.size:]))


def _acl_permits(acl: list[tuple[int, int, int]], file_gid: int, ids: Ids,
                 want: int) -> bool:
    """The kernel's check of an ACL for anyone but the owner (posix_acl_permission): a named
    user's entry, masked; else any of their groups' entries that grants it, masked; else none
    if they are in a group the ACL names; else the others' entry."""
    mask = next((perms for tag, perms, _ in acl if tag == _MASK), 0o7)
    in_a_group = False
    for tag, perms, qualifier in acl:
        if tag == _USER and qualifier == ids.uid:
            return _holds(perms & mask, want)
        if (tag == _GROUP_OBJ and file_gid in ids.groups
                or tag == _GROUP and qualifier in ids.groups):
            if _holds(perms, want):
                return _holds(perms & mask, want)
            in_a_group = True
        if tag == _OTHER:
            return not in_a_group and _holds(perms, want)
    return False


def _holds(bits: int, want: int) -> bool:
    return bits & want == want
