"""Dependency aliases for routes: settings, database, writer and the clock, from app.state.

They are async so FastAPI calls them on the event loop instead of a worker thread."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request

from app.config import Settings
from app.storage.database import Database
from app.storage.writer import Writer


async def get_settings(request: Request) -> Settings:
    """The app's settings object."""
    return request.app.state.settings


async def get_db(request: Request) -> Database:
    """The open database."""
    return request.app.state.db


async def get_writer(request: Request) -> Writer:
    """The single writer."""
    return request.app.state.writer


async def get_clock(request: Request) -> Callable[[], datetime]:
    """The clock (swapped in tests): returns an aware UTC datetime."""
    return request.app.state.clock


SettingsDep = Annotated[Settings, Depends(get_settings)]
DbDep = Annotated[Database, Depends(get_db)]
WriterDep = Annotated[Writer, Depends(get_writer)]
ClockDep = Annotated[Callable[[], datetime], Depends(get_clock)]
