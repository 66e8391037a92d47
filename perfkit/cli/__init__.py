"""The ``perfkit`` command line: a click group whose commands are thin calls into the modules below.

Each command lives in its own module of this package and is imported only when it runs, so
``perfkit lint`` never pays for importing torch.
"""

from __future__ import annotations

import importlib

import click

# command name -> "module:attribute" of its click.Command
COMMANDS = {
    "profile": "perfkit.cli.profile:profile",
    "lint": "perfkit.cli.lint:lint",
    "sweep": "perfkit.cli.sweep:sweep",
    "report": "perfkit.cli.report:report",
    "compare": "perfkit.cli.compare:compare",
    "export-trace": "perfkit.cli.export_trace:export_trace",
    "probe": "perfkit.cli.probe:probe",
    "overhead": "perfkit.cli.overhead:overhead",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(COMMANDS))

    def get_command(self, ctx, name):
        if name in COMMANDS:
            module, attr = COMMANDS[name].split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="perfkit")
def main():
    """perfkit: find what makes the GPU wait in batched RL training loops."""


if __name__ == "__main__":  # pragma: no cover
    main()
