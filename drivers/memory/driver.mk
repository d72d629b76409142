# The in-memory reference driver: nothing beyond the shared core.
