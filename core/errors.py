"""Errors meant for people: what was wrong and what to do."""


class UserError(Exception):
    """Bad input or an unmet precondition. The message says what was wrong and what to do.

    The CLI prints it to stderr and exits with code 2; the GUI shows it in the window.
    """
