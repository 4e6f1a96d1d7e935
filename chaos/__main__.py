"""`python -m chaos`: the same as `kse chaos`."""

import sys

from chaos.cli import main

sys.exit(main())
