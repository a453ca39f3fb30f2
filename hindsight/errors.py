"""The errors a user can fix, and how the command line reports them. A leaf module.

Every module raises its own subclass (``TraceError``, ``ReplayError``, ``ParamError``...), so
that callers can tell them apart, but all of them derive from ``UserError``: the CLI catches that
one family in one place (``hindsight.cli``) and prints ``Error: <message>`` with the class's
exit code, never a traceback. Anything else that escapes is a bug and keeps its traceback.

Exit codes: 2 for usage (a flag or a parameter typed wrong on the command line), 1 for data (a
trace, profile, spec, archive or run that cannot be used). The message names the file or the flag.
"""

from __future__ import annotations


class UserError(Exception):
    """A problem the user can fix; ``str(exc)`` is the whole one-line message."""

    exit_code = 1


class DataError(UserError):
    """An input file, directory or run that cannot be used (exit 1); the message names it."""

    exit_code = 1


class UsageError(UserError):
    """A bad flag, parameter or option value (exit 2); the message names it."""

    exit_code = 2
