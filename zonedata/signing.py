"""Signed data sets: every zone signed by BIND's own `dnssec-keygen` and `dnssec-signzone`.

The signed zone files are an ordinary zone directory (zonefiles.py), so every store loads the
DNSKEY, RRSIG, NSEC, NSEC3 and NSEC3PARAM records like any other record. The keys stay beside
the data, under `<dir>/.keys/` (a dot directory, which `zone_files` never reads as zones), in
the same shard sub-directory as the zone file, with the dsset- file dnssec-signzone writes;
`<dir>/.keys/trust-anchors.conf` holds a `trust-anchors` statement with every zone's KSK
(what `delv -a` takes to validate an answer).

A directory is signed whole or not at all: everything is written into a staging directory
beside the output, which is renamed into place only after the last zone has been signed and
read back. A failure names the zone and the step that failed, and leaves nothing behind.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from base.errors import UserError
from base.process import run_checked
from zonedata.model import Record, Zone
from zonedata.zonefiles import read_zone_file, write_zone_file, zone_file_path

# Algorithm 13: the one RFC 8624 says every validator MUST support, with small keys and
# signatures (a signed data set stays near the size seed 002 reports) and fast key generation.
ALGORITHM = "ECDSAP256SHA256"
# Long enough that a data set signed today still validates when it is measured months later.
VALIDITY_SECONDS = 400 * 86400
KEYS_DIR = ".keys"
TRUST_ANCHORS_FILE = "trust-anchors.conf"
# Types only a signer writes: an input holding them is signed already.
SIGNER_TYPES = frozenset({"DNSKEY", "RRSIG", "NSEC", "NSEC3", "NSEC3PARAM"})
# DNSKEY flags of a key-signing key (zone key + secure entry point).
KSK_FLAGS = "257"


@dataclass(frozen=True)
class SigningOptions:
    """How a data set is signed: NSEC (default) or NSEC3 (RFC 9276: no salt, 0 iterations)."""

    nsec3: bool = False

    def signzone_args(self) -> list[str]:
        return ["-3", "-", "-H", "0"] if self.nsec3 else []


def sign_zones(zones: Iterable[Zone], out: Path, options: SigningOptions | None = None,
               shard: int = 1000) -> int:
    """Sign every zone into the new or empty directory out; return the zone count."""
    options = options or SigningOptions()
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise UserError(f"signed output {out} exists and is not an empty directory")
    out.parent.mkdir(parents=True, exist_ok=True)
    staging = out.parent / f".{out.name}.signing-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    try:
        anchors = [_sign_zone(zone, staging, options, shard) for zone in zones]
        (staging / KEYS_DIR).mkdir(exist_ok=True)
        (staging / KEYS_DIR / TRUST_ANCHORS_FILE).write_text(trust_anchors_text(anchors),
                                                              encoding="ascii")
        os.replace(staging, out)  # rename(2) replaces an empty directory
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return len(anchors)


def _sign_zone(zone: Zone, root: Path, options: SigningOptions, shard: int) -> Zone:
    """Keys, signature and the signed file of one zone under root; the signed zone's DNSKEYs."""
    refuse_signed_input(zone)
    file = zone_file_path(root, zone.key, shard)
    file.parent.mkdir(parents=True, exist_ok=True)
    keys = root / KEYS_DIR / file.parent.relative_to(root)
    keys.mkdir(parents=True, exist_ok=True)
    unsigned = keys / f"{file.name}.unsigned"
    signed = keys / f"{file.name}.signed"
    write_zone_file(zone, unsigned)
    origin = zone.origin.to_text()
    for role in (["-f", "KSK"], []):
        _run_tool(["dnssec-keygen", "-q", "-K", str(keys), "-a", ALGORITHM, *role, origin],
                  zone, "dnssec-keygen (KSK)" if role else "dnssec-keygen (ZSK)", keys)
    _run_tool(["dnssec-signzone", "-q", "-n", "1", "-S", "-K", str(keys), "-d", str(keys),
               "-o", origin, "-f", str(signed), "-e", f"+{VALIDITY_SECONDS}",
               *options.signzone_args(), str(unsigned)], zone, "dnssec-signzone", keys)
    result = read_zone_file(signed)
    check_signed(result, where=str(signed))
    write_zone_file(result, file)
    unsigned.unlink()
    signed.unlink()
    return Zone(result.origin, [r for r in result.records
                                if r.rdtype == "DNSKEY" and r.owner == result.origin])


def _run_tool(argv: list[str], zone: Zone, what: str, cwd: Path) -> None:
    """One BIND tool run; a failure is one line naming the zone, the tool and its last word."""
    try:
        run_checked(argv, what, cwd=cwd)
    except UserError as exc:
        lines = [line.strip() for line in str(exc).splitlines() if line.strip()] or [what]
        cause = f"{lines[0].rstrip(':')}: {lines[-1]}" if len(lines) > 1 else lines[0]
        raise UserError(f"signing zone {zone.origin}: {cause}") from exc


def refuse_signed_input(zone: Zone) -> None:
    """An input that holds signer records is signed already: re-signing would mix two key sets."""
    found = sorted({r.rdtype for r in zone.records} & SIGNER_TYPES)
    if found:
        raise UserError(f"zone {zone.origin} is signed already (it holds {', '.join(found)}): "
                        "signing takes unsigned zones")


def check_signed(zone: Zone, where: str = "") -> None:
    """A signed zone has a KSK at its apex, a signed SOA and an NSEC or NSEC3 chain."""
    place = f" ({where})" if where else ""
    apex = {r.rdtype: r for r in zone.records if r.owner == zone.origin}
    missing = []
    if not any(_is_ksk(r) for r in zone.records if r.owner == zone.origin):
        missing.append("no KSK (DNSKEY with flags 257) at the apex")
    if not any(r.rdtype == "RRSIG" and r.owner == zone.origin and r.rdata.split()[0] == "SOA"
               for r in zone.records):
        missing.append("no RRSIG over the SOA")
    if "NSEC" not in apex and "NSEC3PARAM" not in apex:
        missing.append("no NSEC or NSEC3PARAM at the apex")
    if missing:
        raise UserError(f"zone {zone.origin}{place} is not signed: {'; '.join(missing)}")


def _is_ksk(record: Record) -> bool:
    return record.rdtype == "DNSKEY" and record.rdata.split()[0] == KSK_FLAGS


def trust_anchors_text(zones: Iterable[Zone]) -> str:
    """A named.conf/delv `trust-anchors` statement: every zone's KSKs as static keys.

    The zone name goes in verbatim: BIND's config lexer keeps a quoted string's backslashes,
    and the presentation text already escapes every `"` as `\\"`.
    """
    lines = ["trust-anchors {\n"]
    for zone in zones:
        for record in zone.records:
            if _is_ksk(record):
                flags, protocol, algorithm, *key = record.rdata.split()
                lines.append(f'\t"{zone.origin.to_text()}" static-key {flags} {protocol} '
                             f'{algorithm} "{"".join(key)}";\n')
    lines.append("};\n")
    return "".join(lines)
