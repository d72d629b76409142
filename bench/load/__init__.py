"""Load tools: dnsperf, resperf and the latency prober (with its C source)."""
