"""The one error style of every ``perfkit`` command: ``Error: <what went wrong>`` on stderr, exit 2.

Bad input (a missing or malformed file, an unwritable output, an unknown rule code) raises
:class:`BadInput`; click prints it as ``Error: ...`` and exits 2, like its own usage errors. No
command shows a traceback for a user's mistake.
"""

from __future__ import annotations

import click


class BadInput(click.ClickException):
    """A user-facing error: printed as ``Error: <message>``, exit status 2."""

    exit_code = 2
