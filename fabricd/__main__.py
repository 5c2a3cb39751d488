"""`python -m fabricd` runs the CLI."""

from fabricd.cli import main

main()
