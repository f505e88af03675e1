"""`python -m acid_platform`: see acid_platform.launcher."""

import sys

from acid_platform.launcher import main

sys.exit(main())
