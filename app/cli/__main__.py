"""`python -m app.cli`: the same as the `tokenshape` command."""

from app.cli import main

raise SystemExit(main())
