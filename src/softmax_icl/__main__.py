"""``python -m softmax_icl ...``: the ``softmax-icl`` command. Imported as a module (the API pages' autosummary
imports every module) it runs nothing."""

import sys

from .figures import main

if __name__ == "__main__":
    sys.exit(main())
