"""The one exception type the CLI turns into a one-line error and a non-zero exit."""


class UserError(Exception):
    """A problem the user can fix (bad input, unknown name, a server that will not start).

    The message is complete on its own: the CLI prints `error: <message>` and exits 1,
    without a traceback.
    """
