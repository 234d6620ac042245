import sys

from fastworker.cli import main

sys.exit(main())
