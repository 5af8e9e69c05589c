"""``python -m ttmodels ...`` is the ``ttmodels`` command (for a venv whose scripts are not on
PATH)."""
import sys

from .tools.cli import main

sys.exit(main())
