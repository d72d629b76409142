"""Zone files in and out: RFC 1035 master files read with dnspython, written for dnspython and BIND.

A directory holds one zone per file, possibly sharded into sub-directories. Files we write carry
`$ORIGIN` and absolute names everywhere, so the origin never depends on the file name (which is
derived from the zone name but must be safe for any name: `/`, `\\`, binary bytes, the root).
"""

from __future__ import annotations

import hashlib
import itertools
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path

import dns.exception
import dns.name
import dns.rdataclass
import dns.rdatatype
import dns.tokenizer
import dns.zone
import dns.zonefile

from base.errors import UserError
from zonedata.model import Zone, from_rdata

ZONE_SUFFIXES = (".zone", ".db")
# Files in a zone directory that are never zone files: ours (queries.txt), BIND's journals,
# DNSSEC keys kept beside the zones they sign (K<zone>+<alg>+<id>.key / .private).
_NOT_ZONE_SUFFIXES = (".txt", ".jnl", ".conf", ".json", ".md", ".log", ".tmp", ".key",
                      ".private")
# Octets kept as they are in a file name; every other octet of the zone key becomes %XX.
_SAFE_FILE_CHARS = frozenset(b"abcdefghijklmnopqrstuvwxyz0123456789-.")
_MAX_FILE_STEM = 180


# --- reading -------------------------------------------------------------------------------


def read_zone_dir(path: Path) -> Iterator[Zone]:
    """Every zone file under `path` (recursively, sorted), one zone per file, one at a time."""
    path = Path(path)
    if not path.is_dir():
        raise UserError(f"zone directory {path} does not exist or is not a directory")
    files = zone_files(path)
    first = next(files, None)
    if first is None:
        raise UserError(f"zone directory {path} holds no zone files")
    return (read_zone_file(file) for file in itertools.chain([first], files))


def zone_files(root: Path) -> Iterator[Path]:
    """Zone files under root in a stable order, without listing the whole tree at once."""
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith("."))
        for name in sorted(filenames):
            if not name.startswith(".") and not name.endswith(_NOT_ZONE_SUFFIXES):
                yield Path(dirpath) / name


def read_zone_file(file: Path, origin: dns.name.Name | None = None) -> Zone:
    """One zone file -> model Zone; any problem is a UserError naming file (and line).

    `origin` is the zone's name when known from elsewhere (a named.conf zone statement), as
    named reads it; without it the origin comes from the file (zone_file_origin).
    """
    try:
        text = file.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{file}: cannot read zone file: {exc}") from exc
    if origin is None:
        origin = zone_file_origin(text, file)
    tok = _LineTrackingTokenizer(text, str(file))
    zone = dns.zone.Zone(origin, relativize=False)
    try:
        with zone.writer(replacement=True) as txn:
            dns.zonefile.Reader(tok, dns.rdataclass.IN, txn).read()
    except dns.exception.DNSException as exc:
        raise UserError(_describe_error(exc, file, tok.token_line)) from exc
    try:
        zone.check_origin()
    except dns.exception.DNSException as exc:
        raise UserError(_describe_error(exc, file)) from exc
    return _to_model(zone)


class _LineTrackingTokenizer(dns.tokenizer.Tokenizer):
    """Remembers the line of the last real token, for error messages.

    dnspython reports the tokenizer's current line, which is one too far when a bad token ends
    its line (the newline has been read already); the last token's own line is the right one.
    """

    token_line = 0

    def get(self, want_leading: bool = False,
            want_comment: bool = False) -> dns.tokenizer.Token:
        token = super().get(want_leading, want_comment)
        if not token.is_eol_or_eof() and not token.is_whitespace():
            self.token_line = self.line_number - (self.ungotten_char == "\n")
        return token


def zone_file_origin(text: str, file: Path) -> dns.name.Name | None:
    """The origin to parse with; None lets dnspython take the file's first `$ORIGIN`.

    Precedence: `$ORIGIN` in the file, else the SOA owner when written absolute, else the file
    name without a .zone/.db suffix.
    """
    if _starts_with_origin_directive(text):
        return None
    owner = _absolute_soa_owner(text, file)
    if owner is not None:
        return owner
    return _origin_from_file_name(file)


def _starts_with_origin_directive(text: str) -> bool:
    """True if a `$ORIGIN` comes before the first record (a later one names a sub-tree only)."""
    for line in text.splitlines():
        content = line.split(";", 1)[0].strip()
        if not content or line[:4].upper() == "$TTL":
            continue
        return line[:7].upper() == "$ORIGIN"
    return False


def _absolute_soa_owner(text: str, file: Path) -> dns.name.Name | None:
    """The SOA owner if the file writes it as an absolute name, else None.

    dnspython's tokenizer splits the file into logical lines (it handles comments, quotes and
    parentheses); the SOA line is the one whose type field, after an optional TTL and class, is
    SOA. An owner left blank repeats the previous line's.
    """
    tok = dns.tokenizer.Tokenizer(text, str(file))
    owner: str | None = None
    try:
        while True:
            first = tok.get(want_leading=True)
            if first.is_eof():
                return None
            if first.is_eol():
                continue
            fields = _rest_of_line(tok)
            if first.value.startswith("$"):
                continue
            if not first.is_whitespace():
                owner = first.value
            if owner is not None and _record_type(fields) == "SOA":
                name = dns.name.from_text(owner, origin=None)
                return name if name.is_absolute() else None
    except dns.exception.DNSException as exc:
        raise UserError(_describe_error(exc, file)) from exc


def _rest_of_line(tok: dns.tokenizer.Tokenizer) -> list[str]:
    fields = []
    while not (token := tok.get()).is_eol_or_eof():
        fields.append(token.value)
    return fields


def _record_type(fields: list[str]) -> str | None:
    """The type field of a record line's fields after the owner: skip TTL and class."""
    for field in fields[:3]:
        if field[:1].isdigit():
            continue
        if field.upper() in ("IN", "CH", "HS", "CS", "ANY", "NONE") or field.upper().startswith(
                "CLASS"):
            continue
        return field.upper()
    return None


def _origin_from_file_name(file: Path) -> dns.name.Name:
    stem = file.name
    for suffix in ZONE_SUFFIXES:
        if stem.lower().endswith(suffix) and len(stem) > len(suffix):
            stem = stem[: -len(suffix)]
            break
    try:
        return dns.name.from_text(stem)
    except dns.exception.DNSException as exc:
        raise UserError(f"{file}: no $ORIGIN, no absolute SOA owner, and the file name is not a "
                        f"domain name: {exc}") from exc


def _describe_error(exc: dns.exception.DNSException, file: Path, line: int = 0) -> str:
    """'<file>:<line>: <problem>' on one line (without a line when none applies)."""
    message = " ".join(str(exc).split()) or type(exc).__name__
    # dnspython's syntax errors read '<file>:<its line>: <problem>'; keep only the problem.
    message = re.sub(rf"^{re.escape(str(file))}:\d+: ", "", message)
    if isinstance(exc, dns.zone.NoSOA):
        message = "no SOA record at the zone origin"
    elif isinstance(exc, dns.zone.NoNS):
        message = "no NS records at the zone origin"
    elif isinstance(exc, dns.zonefile.UnknownOrigin):
        message = "a record comes before any $ORIGIN and the origin is unknown"
    return f"{file}:{line}: {message}" if line else f"{file}: {message}"


def _to_model(zone: dns.zone.Zone) -> Zone:
    origin = zone.origin
    assert origin is not None  # dnspython sets it from the argument or the first $ORIGIN
    records = [from_rdata(name, rdataset.ttl, rd)
               for name, node in zone.nodes.items()
               for rdataset in node
               for rd in rdataset]
    return Zone(origin, records)


# --- writing -------------------------------------------------------------------------------


def zone_file_text(zone: Zone) -> str:
    """Master-file text: $ORIGIN, SOA first, one absolute record per line."""
    records = sorted(zone.records, key=lambda r: r.rdtype != "SOA")  # stable: SOA first
    lines = [f"$ORIGIN {zone.origin.to_text()}\n"]
    lines += [f"{r.owner.to_text()} {r.ttl} IN {r.rdtype} {r.rdata}\n" for r in records]
    return _escape_unquoted("".join(lines))


# Octets dnspython writes as themselves in names that Knot 3.2's zone scanner refuses outside
# a quoted string ("invalid domain name character"); written as \DDD they are the same octet
# to every reader (BIND, NSD, PowerDNS, dnspython).
_UNQUOTED_ESCAPES = {"'": "\\039", "%": "\\037"}


def _escape_unquoted(text: str) -> str:
    """text with the _UNQUOTED_ESCAPES octets outside quoted strings written as \\DDD."""
    if not any(char in text for char in _UNQUOTED_ESCAPES):
        return text  # the generated data sets: no octet-by-octet pass over millions of zones
    out: list[str] = []
    quoted = escaped = False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\":
            escaped = True
        elif char == '"':
            quoted = not quoted
        elif not quoted and char in _UNQUOTED_ESCAPES:
            out.append(_UNQUOTED_ESCAPES[char])
            continue
        out.append(char)
    return "".join(out)


def write_zone_file(zone: Zone, path: Path) -> None:
    """Write atomically: a reader sees the old file or the new one, never a partial file."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "w", encoding="ascii") as out:
            out.write(zone_file_text(zone))
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def zone_file_name(zone_key: str) -> str:
    """A portable file name for a zone key, unique per key: unsafe octets become %XX.

    The root zone (key '.') becomes '%2E.zone'; a stem too long for a file system is cut and
    completed with a digest of the whole key.
    """
    raw = zone_key.encode()
    if raw == b".":
        stem = "%2E"
    else:
        stem = "".join(chr(b) if b in _SAFE_FILE_CHARS else f"%{b:02X}" for b in raw)
    if len(stem) > _MAX_FILE_STEM:
        digest = hashlib.sha256(raw).hexdigest()[:16]
        stem = f"{stem[:_MAX_FILE_STEM - 17]}~{digest}"
    return f"{stem}.zone"


def zone_file_path(root: Path, zone_key: str, shard: int = 1000) -> Path:
    """Where a zone's file lives: in one of `shard` sub-directories picked by a digest of its key.

    The place depends only on the key, so reloading a zone replaces its file in place. `shard`
    of 1 or less writes every file directly under root.
    """
    name = zone_file_name(zone_key)
    if shard <= 1:
        return Path(root) / name
    bucket = int.from_bytes(hashlib.sha256(zone_key.encode()).digest()[:8], "big") % shard
    return Path(root) / f"{bucket:0{len(str(shard - 1))}d}" / name


def write_zone_dir(zones: Iterable[Zone], path: Path, shard: int = 1000) -> int:
    """Write each zone to its file under path (replacing a present one); return the zone count."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    count = 0
    for zone in zones:
        file = zone_file_path(path, zone.key, shard)
        file.parent.mkdir(exist_ok=True)
        write_zone_file(zone, file)
        count += 1
    return count
