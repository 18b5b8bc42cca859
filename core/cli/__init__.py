"""One module per `bringup` subcommand: `configure(parser)` and `main(args) -> int`."""
