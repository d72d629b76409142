"""The bottom layer: what every other package may use and what uses nothing of theirs.

errors (the one user-facing exception), paths (where the repository's parts are), process
(starting, watching and stopping private server processes; ports and run directories).
"""
