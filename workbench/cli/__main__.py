import sys

from workbench.cli.main import main

sys.exit(main())
