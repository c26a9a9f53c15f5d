"""``python -m mcpfast`` runs the command line."""

import sys

from mcpfast.cli import main

__all__: list[str] = []

sys.exit(main())
