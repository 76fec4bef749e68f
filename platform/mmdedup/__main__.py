"""`python -m mmdedup` is the `mmdedup` command."""

from .cli import main

raise SystemExit(main())
