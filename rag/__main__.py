"""`python -m rag` runs the command line (see rag/cli.py)."""

import sys

from .cli import main

sys.exit(main())
