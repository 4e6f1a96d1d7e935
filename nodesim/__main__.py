"""`python -m nodesim ...` is `kse nodesim ...`."""

import sys

from nodesim.cli import main

sys.exit(main())
