"""`tokenshape user`: add, list, change or remove dashboard users while the server is stopped."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING

from app.cli.common import add_db, command, open_db, settings_for

if TYPE_CHECKING:
    from app.cli.common import Subparsers
    from app.services.credentials import Credentials

ROLES = ["viewer", "admin"]  # spelled out, not imported: `--help` loads no storage module


def add_parser(subparsers: Subparsers) -> None:
    """Add `user` and its actions: add, passwd, role, remove, list."""
    usr = command(subparsers, "user", cmd_user, "Add, list, change or remove dashboard users.")
    actions = usr.add_subparsers(dest="action", required=True)
    add = actions.add_parser("add", help="add a user (password asked, or --password-stdin)")
    add.add_argument("name", help="user name for the login form")
    add.add_argument("--role", required=True, choices=ROLES)
    passwd = actions.add_parser("passwd", help="change a user's password")
    passwd.add_argument("name")
    role = actions.add_parser("role", help="change a user's role")
    role.add_argument("name")
    role.add_argument("role", choices=ROLES)
    remove = actions.add_parser("remove", help="remove a user (their sessions end)")
    remove.add_argument("name")
    for p in (add, passwd):
        p.add_argument("--password-stdin", action="store_true", help="read the password from stdin")
    for p in (add, passwd, role, remove, actions.add_parser("list", help="list users")):
        add_db(p)  # after the action's own options, where its help has always shown it


def cmd_user(args: argparse.Namespace) -> int:
    """Add, list, change or remove dashboard users."""
    from app.services.credentials import Credentials

    settings = settings_for(args)
    with open_db(settings) as db:
        creds = Credentials(db)  # no AuthState: no server runs, so no sessions to drop
        if args.action == "list":
            _print_users(creds)
            return 0
        if args.action == "add":
            user = creds.add_user(args.name, _password(args), args.role)
            print(f"added {user.name} as {user.role}")
            return 0
        return _change(creds, args)


def _print_users(creds: Credentials) -> None:
    """One line per user, or how to add the first."""
    rows = creds.users()
    if not rows:
        print("no users yet: tokenshape user add NAME --role admin")
    for u in rows:
        seen = f"{u.last_login_at:%Y-%m-%d %H:%M}" if u.last_login_at else "never"
        made = f"{u.created_at:%Y-%m-%d}"
        print(f"{u.name:<24} {u.role:<7} created {made}  last login {seen}")


def _change(creds: Credentials, args: argparse.Namespace) -> int:
    """passwd, role or remove; 1 when there is no such user."""
    if args.action == "passwd":
        done = creds.set_password(args.name, _password(args))
        what = "password changed; their sessions ended"
    elif args.action == "role":
        done = creds.set_role(args.name, args.role)
        what = f"now {args.role}; their sessions ended"
    else:
        done = creds.remove_user(args.name)
        what = "removed"
    if not done:
        print(f"error: no user named {args.name!r} (see `tokenshape user list`)", file=sys.stderr)
        return 1
    print(f"{args.name}: {what}")
    return 0


def _password(args: argparse.Namespace) -> str:
    """The new password: one line of stdin with --password-stdin, else asked twice."""
    if args.password_stdin:
        return sys.stdin.readline().rstrip("\r\n")
    import getpass

    first = getpass.getpass(f"password for {args.name}: ")
    if getpass.getpass("again: ") != first:
        raise ValueError("the two passwords differ; nothing was changed")
    return first
