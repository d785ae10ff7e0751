"""``python -m motionmatch``: the ``motionmatch`` command."""

import sys

from motionmatch.cli.main import main

sys.exit(main())
