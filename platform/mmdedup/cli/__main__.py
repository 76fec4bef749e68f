"""`python -m mmdedup.cli` is the `mmdedup` command too (as it was when cli was a module)."""

from . import main

raise SystemExit(main())
