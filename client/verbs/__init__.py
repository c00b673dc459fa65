"""One module per `autoharnessctl` verb. Each has an `add_parser(sub)` that adds the verb's
sub-parser (its options and `--help`) with `func=do_<verb>`, and that `do_<verb>(args) -> int`.
`client/ctl.py` lists the modules, builds the parser from them and calls `args.func`; errors
follow the one rule of `client/errors.py`. A verb with operations (`queue list`, `service
install`) picks the operation from a table keyed by its name."""
