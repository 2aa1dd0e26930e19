"""`python -m privface.cli`."""
import sys

from . import main

sys.exit(main())
