"""The `torchpace` command line: one module per subcommand with add_parser() and run(args)."""
