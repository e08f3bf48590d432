"""The app layer: the `ptxsim` command line (`cli`, one module per subcommand in
`commands/`), sweeps and their point runners, goldens and progress display.

It sits above `workloads` and `reports` and is imported by nothing in the project.
"""
