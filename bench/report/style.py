"""One look per server in every plot with a line or bar per server.

The registry has more servers than matplotlib's ten default colours: native and bdbhpt-p were
drawn in the same blue. tab20's dark shades go to the first ten servers and its light ones to
the next ten, each with its own marker too; tab20b's to the twenty after them.
"""

from __future__ import annotations

from servers import base_name, server_names

_MARKERS = "osD^v<>ph*"


def server_style(server: str) -> dict[str, object]:
    """matplotlib keyword arguments for the line of `server` (the same in every plot); a row
    on another BIND (NAME@VERSION) looks like NAME's, dashed."""
    import matplotlib

    names = server_names()
    base = base_name(server)
    index = names.index(base) if base in names else len(names)
    shade = (2 * index) % 20 + (index // 10) % 2
    colours = matplotlib.colormaps["tab20" if index < 20 else "tab20b"]
    return {"color": colours(shade),
            "marker": _MARKERS[index % len(_MARKERS)],
            "linestyle": "-" if base == server else "--", "label": server}
