from workbench.cli import main
from workbench.cli.main import exit_with

exit_with(main())
