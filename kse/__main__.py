import sys

from kse.cli.main import main

sys.exit(main())
