"""named's update policy: which of its zones take RFC 2136 dynamic updates, and who may send them.

A named row takes updates under one rule for all its update zones (the DLZ core's arguments are
per driver instance), where base/update_access.py's UpdateAccess, what a measurement grants any
server, may leave some zones open and key others on the same instance (Knot, PowerDNS);
servers/kind.py's named_update_policy turns the one into the other. One NamedUpdatePolicy
describes the same policy to native BIND and to every DLZ driver that takes updates, so that
each comparison is against native BIND that received the same messages under the same rules:
  - native BIND: `update-policy { grant KEY zonesub ANY; };` on each update zone (or, for
    unsigned updates, `allow-update { any; };`), its journal in its own run directory;
  - a DLZ driver: update_zones, update_key and update_unsigned (drivers/common/dlz_driver.h,
    "writing"), the same grant made by the core's dlz_ssumatch.
The keys are `key` statements of named.conf, written with the rest of it by
base.process.write_private (mode 0600); their secrets go nowhere else.
"""

from __future__ import annotations

from dataclasses import dataclass

import dns.name

from base.update_access import TsigKey
from zonedata.model import name_key


@dataclass(frozen=True)
class NamedUpdatePolicy:
    """Update zones; the key granted every name inside them (None: none); keys named also
    knows but grants nothing (a wrong key that still passes TSIG); whether unsigned updates
    are granted too (over TCP only for a DLZ driver: see dlz_driver.h)."""

    zones: tuple[dns.name.Name, ...]
    key: TsigKey | None
    other_keys: tuple[TsigKey, ...] = ()
    unsigned: bool = False

    def key_statements(self) -> str:
        keys = ([self.key] if self.key else []) + list(self.other_keys)
        return "".join(key.named_clause() for key in keys)

    def takes(self, origin: dns.name.Name) -> bool:
        return origin in self.zones

    def zone_keys(self) -> list[str]:
        """The update zones as keys (the drivers' and the stores' spelling of names)."""
        return [name_key(zone) for zone in self.zones]

    def dlz_args(self) -> dict[str, str]:
        """The DLZ core's arguments."""
        args = {"update_zones": ",".join(self.zone_keys())}
        if self.key is not None:
            args["update_key"] = self.key.bare_name  # as named names the signer
        if self.unsigned:
            args["update_unsigned"] = "yes"
        return args

    def native_zone_options(self) -> str:
        """What a native primary zone's block needs to take the same updates."""
        if self.unsigned:
            # update-policy cannot grant an unsigned update (only tcp-self, by address);
            # allow-update can, and grants signed ones too.
            return "allow-update { any; }; "
        if self.key is None:
            return ""  # no policy: every update REFUSED
        return f'update-policy {{ grant "{self.key.name}" zonesub ANY; }}; '
