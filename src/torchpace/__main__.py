"""`python -m torchpace` runs the command line."""

from torchpace.cli.main import main

raise SystemExit(main())
