"""python -m inr: the command line."""

import sys

from .cli import main

sys.exit(main())
