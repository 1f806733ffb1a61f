"""``python -m nmt.serve``: see ``nmt.serve.app``."""

import sys

from nmt.serve.app import main

sys.exit(main())
