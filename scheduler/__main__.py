"""`python -m scheduler`: the same as `kse scheduler`."""

import sys

from scheduler.cli import main

sys.exit(main())
