"""``python -m softmax_icl ...``: the ``softmax-icl`` command."""

import sys

from .figures import main

sys.exit(main())
