"""Subcommands of `ptxsim`; one module each (see `simulator.app.cli`)."""
