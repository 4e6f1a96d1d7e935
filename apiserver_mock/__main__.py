import sys

from apiserver_mock.cli import main

sys.exit(main())
