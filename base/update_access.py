"""Who may send a server RFC 2136 dynamic updates: the TSIG key of a run, and which zones take
updates without a key (from loopback) and which only with it.

One server instance serves both kinds of zone at once, so `updates` measures with and without
TSIG on the same running server instead of restarting it between the two (native BIND's
update-policy and allow-update, PowerDNS's TSIG-ALLOW-DNSUPDATE and Knot's acl are all per
zone). The key is made afresh for every run (`TsigKey.generate`); every configuration that
holds it is written 0600 (base.process.write_private).
"""

from __future__ import annotations

import base64
import secrets
from collections.abc import Iterable
from dataclasses import dataclass

import dns.name
import dns.tsig
import dns.tsigkeyring

# HMAC-SHA256: what tsig-keygen makes by default (BIND 9.18) and every server here takes.
ALGORITHM = "hmac-sha256"
# tsig-keygen's secret for hmac-sha256 is 32 random octets.
_SECRET_OCTETS = 32


@dataclass(frozen=True)
class TsigKey:
    """A TSIG key: its name (a domain name, absolute), algorithm and base64 secret."""

    name: str
    secret: str
    algorithm: str = ALGORITHM

    @classmethod
    def generate(cls, name: str = "dlzbench-update.") -> TsigKey:
        """A new random key, as `tsig-keygen -a hmac-sha256 NAME` makes one."""
        return cls(name, base64.b64encode(secrets.token_bytes(_SECRET_OCTETS)).decode())

    def wrong_secret(self) -> TsigKey:
        """The same name and algorithm with another secret: what a sender who does not
        know the key signs with."""
        return TsigKey(self.name, TsigKey.generate(self.name).secret, self.algorithm)

    @property
    def bare_name(self) -> str:
        """The name without its final dot (PowerDNS's tsigkeys rows, Knot's key id)."""
        return self.name.rstrip(".")

    def dnspython_key(self) -> dns.tsig.Key:
        return dns.tsig.Key(self.name, self.secret, self.algorithm)

    def keyring(self) -> dict[dns.name.Name, dns.tsig.Key]:
        """dnspython's keyring for signing with this key (dns.update.UpdateMessage)."""
        return dns.tsigkeyring.from_text({self.name: (self.algorithm, self.secret)})

    def named_clause(self) -> str:
        """named.conf's key statement."""
        return (f'key "{self.name}" {{\n\talgorithm {self.algorithm};\n'
                f'\tsecret "{self.secret}";\n}};\n')


@dataclass(frozen=True)
class UpdateAccess:
    """The zones that take updates, as a measurement grants them to any server: `open_zones`
    from loopback without a key, `keyed_zones` only signed with `key` (from loopback too).
    A named row takes them under one rule for every zone (servers/update_policy.py)."""

    open_zones: tuple[dns.name.Name, ...]
    keyed_zones: tuple[dns.name.Name, ...]
    key: TsigKey

    def __post_init__(self) -> None:
        if set(self.open_zones) & set(self.keyed_zones):
            raise ValueError("a zone is either open or keyed")

    @property
    def zones(self) -> tuple[dns.name.Name, ...]:
        return (*self.open_zones, *self.keyed_zones)

    def takes_key(self, zone: dns.name.Name) -> bool:
        return zone in self.keyed_zones

    def of(self, zones: Iterable[dns.name.Name]) -> list[dns.name.Name]:
        """Those of `zones` that take updates, in the given order."""
        mine = set(self.zones)
        return [zone for zone in zones if zone in mine]
