# The filesystem driver: nothing beyond the shared core.
