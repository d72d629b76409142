"""Measuring: the runner and one module per measurement; every clock and counter is here."""
