"""`python -m controllers`: the same as `kse controller-manager`."""

import sys

from controllers.manager import main

sys.exit(main())
