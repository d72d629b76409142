"""Reporting: one shared formatting module, one report module per measurement, plot style."""
