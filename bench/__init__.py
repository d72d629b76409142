"""dlzbench: runner, server control and command-line interface."""
