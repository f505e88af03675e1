"""`python -m acid_cli.platform`: see acid_cli.platform.launcher."""

import sys

from acid_cli.platform.launcher import main

sys.exit(main())
