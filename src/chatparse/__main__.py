"""`python -m chatparse`: the same command line as the `chatparse` script."""

from chatparse.cli import main

raise SystemExit(main())
