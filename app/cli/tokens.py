"""`tokenshape token`: create, list, rotate or revoke API tokens while the server is stopped."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from app.cli.common import add_db, command, open_db, settings_for

if TYPE_CHECKING:
    from app.cli.common import Subparsers
    from app.services.credentials import Credentials, TokenInfo

TOKEN_ID = "token id from `tokenshape token list`"


def add_parser(subparsers: Subparsers) -> None:
    """Add `token` and its actions: create, list, revoke, rotate."""
    tok = command(subparsers, "token", cmd_token, "Create, list, rotate or revoke API tokens.")
    actions = tok.add_subparsers(dest="action", required=True)
    create = actions.add_parser("create", help="create a token (printed once, last line)")
    create.add_argument("--gateway", required=True, help="gateway name the token ships as")
    create.add_argument("--scope", required=True, choices=["ingest", "read", "admin"])
    listing = actions.add_parser(
        "list", help="list tokens (never their secrets) with their last use"
    )
    revoke = actions.add_parser("revoke", help="revoke a token by id")
    revoke.add_argument("id", help=TOKEN_ID)
    rotate = actions.add_parser("rotate", help="replace a token by a new one (old one revoked)")
    rotate.add_argument("id", help=TOKEN_ID)
    for p in (create, revoke, rotate, listing):
        add_db(p)  # after the action's own options, where its help has always shown it


def cmd_token(args: argparse.Namespace) -> int:
    """Create, list, rotate or revoke API tokens."""
    from app.services.credentials import Credentials

    settings = settings_for(args)
    with open_db(settings) as db:
        creds = Credentials(db)  # no AuthState: no server runs, so no cache to drop
        if args.action == "create":
            token, info = creds.create_token(args.gateway, args.scope)
            print(
                f"created token {info.id} for gateway '{info.gateway}' with scope "
                f"'{info.scope}'. It is shown only once; store it now:"
            )
            print(token)
            return 0
        if args.action == "list":
            _print_tokens(creds.tokens())
            return 0
        if args.action == "revoke":
            return _revoke(creds, args.id)
        return _rotate(creds, args.id)


def _print_tokens(rows: list[TokenInfo]) -> None:
    """One line per token, or how to make the first."""
    if not rows:
        print("no tokens yet: tokenshape token create --gateway NAME --scope ingest")
    for t in rows:
        state = f"revoked {t.revoked_at:%Y-%m-%d}" if t.revoked_at else "active"
        used = f"{t.last_used_at:%Y-%m-%d %H:%M}" if t.last_used_at else "never"
        print(
            f"{t.id}  {t.display:<16} {t.gateway:<24} {t.scope:<7} "
            f"created {t.created_at:%Y-%m-%d %H:%M}  used {used:<16}  {state}"
        )


def _no_token(token_id: str) -> int:
    """Say there is no live token with that id; exit code 1."""
    print(
        f"error: no active token with id {token_id!r} (see `tokenshape token list`)",
        file=sys.stderr,
    )
    return 1


def _revoke(creds: Credentials, token_id: str) -> int:
    """Revoke a live token."""
    if not creds.revoke_token(token_id):
        return _no_token(token_id)
    print(f"revoked token {token_id}")
    return 0


def _rotate(creds: Credentials, token_id: str) -> int:
    """Replace a live token by a new one, printed once."""
    rotated = creds.rotate_token(token_id)
    if rotated is None:
        return _no_token(token_id)
    token, info = rotated
    print(
        f"rotated: token {token_id} is revoked; the new token {info.id} for gateway "
        f"'{info.gateway}' ({info.scope}) is shown only once; store it now:"
    )
    print(token)
    return 0
