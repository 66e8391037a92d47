"""Commands that run a program: ``perfkit profile [OPTIONS] SCRIPT [ARGS]...`` (``-m MODULE [ARGS]...``).

As ``python`` does, perfkit's own options end where the program starts — at the first argument that
is not an option or an option's value, or right after ``-m MODULE`` — and everything from there on
goes to the program unchanged (``perfkit profile x.py --num-envs 4`` gives ``--num-envs 4`` to x.py).
Before that point every option must be one of the command's own, so a misspelling gets click's
``No such option: --max-sync-per-step Did you mean --max-syncs-per-step?`` (exit 2) rather than being
taken for the script's name.
"""

from __future__ import annotations

import click


class ProgramCommand(click.Command):
    """A click command whose variadic last argument is a program and its arguments.

    ``program_options``: the parameter names whose value is the program itself (``-m MODULE``)."""

    program_options: tuple[str, ...] = ("module",)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        at = self.program_start(ctx, args)
        if at is not None and at < len(args) and (at == 0 or args[at - 1] != "--"):
            args = [*args[:at], "--", *args[at:]]  # click reads what follows `--` as arguments, unchanged
        return super().parse_args(ctx, args)

    def program_start(self, ctx: click.Context, args: list[str]) -> int | None:
        """The index in ``args`` where the program and its arguments start; None when they are absent."""
        takes_value: dict[str, tuple[bool, str | None]] = {}
        for p in self.get_params(ctx):
            if isinstance(p, click.Option):
                for o in (*p.opts, *p.secondary_opts):
                    takes_value[o] = (not (p.is_flag or p.count), p.name)
        i = 0
        while i < len(args):
            a = args[i]
            if a == "--":
                return i + 1
            if a.startswith("--"):
                name, eq, _ = a.partition("=")
                value, pname = takes_value.get(name, (False, None))
                if value and not eq:
                    i += 1  # its value, whatever it looks like
                if pname in self.program_options:
                    return i + 1
                i += 1
                continue
            if a.startswith("-") and a != "-":
                for j in range(1, len(a)):  # a cluster of short options: -qm MODULE, -oPATH
                    value, pname = takes_value.get("-" + a[j], (False, None))
                    if value:
                        if j == len(a) - 1:
                            i += 1  # the value is the next argument
                        if pname in self.program_options:
                            return i + 1
                        break
                i += 1
                continue
            return i  # the first positional argument: the script
        return None
