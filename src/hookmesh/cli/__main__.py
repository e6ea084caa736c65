"""``python -m hookmesh.cli``: the `hookmesh` command."""

from hookmesh.cli import main

main()
