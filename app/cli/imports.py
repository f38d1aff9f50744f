"""`tokenshape import`: load a file of request records into the database."""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from app.cli.common import Progress, command, open_db, settings_for

if TYPE_CHECKING:
    from app.cli.common import Subparsers

FORMATS = ["auto", "ndjson", "csv", "parquet", "azure", "genai-perf", "aiperf"]


def add_parser(subparsers: Subparsers) -> None:
    """Add `import`."""
    imp = command(subparsers, "import", cmd_import, "Import a file of request records.")
    imp.add_argument("file", help="the file to import")
    imp.add_argument("--gateway", help="gateway name to store the records under")
    imp.add_argument(
        "--format",
        default="auto",
        choices=FORMATS,
        help="file format (default: from the extension and header)",
    )
    imp.add_argument("--model", help="model name for formats that carry none (azure)")
    imp.add_argument(
        "--tokenizer",
        help="a Hugging Face tokenizer.json to count GenAI-Perf tokens (else they are estimated)",
    )


def cmd_import(args: argparse.Namespace) -> int:
    """Load a file of records into the database."""
    from ingest import importer
    from ingest.formats import files

    settings = settings_for(args)
    path = Path(args.file)
    if not path.is_file():
        print(f"error: {path} is not a file", file=sys.stderr)
        return 1
    fmt = files.detect(path) if args.format == "auto" else args.format
    gateway = args.gateway or files.default_gateway(path, fmt)
    with open_db(settings) as db:
        progress = Progress(f"import {path.name}", None)
        started = time.monotonic()
        stats = importer.import_file(
            db,
            path,
            fmt,
            gateway=gateway,
            model=args.model,
            raw_chars=settings.reject_raw_chars,
            progress=progress.advance,
            tokenizer=Path(args.tokenizer) if args.tokenizer else None,
            tz=settings.tz,  # the daily rollups' days
        )
        progress.close()
    print(
        f"import: {stats.accepted:,} stored, {stats.duplicates:,} duplicates, "
        f"{stats.rejected:,} rejected (see the rejects table) from {path} as {fmt}, "
        f"gateway '{gateway}', in {time.monotonic() - started:.1f} s"
    )
    for line in stats.first_errors:
        print(f"  {line}")
    return 0
