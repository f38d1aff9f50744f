"""Dependency aliases for routes: the runtime, settings, database, writer and the clock.

They are async so FastAPI calls them on the event loop instead of a worker thread."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Annotated

from fastapi import Depends, Request

from app.config import Settings
from app.server.runtime import Runtime
from app.services.credentials import Credentials
from app.sizing.slo import Fleet
from app.storage.database import Database
from app.storage.write.writer import Writer, WriterStopped


async def get_runtime(request: Request) -> Runtime:
    """The running system."""
    return request.app.state.runtime


async def get_settings(request: Request) -> Settings:
    """The app's settings object."""
    return request.app.state.runtime.settings


async def get_db(request: Request) -> Database:
    """The open database."""
    return request.app.state.runtime.db


async def get_writer(request: Request) -> Writer:
    """The single writer (WriterStopped before the server has started it)."""
    writer = request.app.state.runtime.writer
    if writer is None:
        raise WriterStopped("the writer is not running")
    return writer


async def get_clock(request: Request) -> Callable[[], datetime]:
    """The clock (swapped in tests): returns an aware UTC datetime."""
    return request.app.state.runtime.clock


async def get_fleet(request: Request) -> Fleet:
    """The fleet's defaults for SLOs and money, from the settings."""
    return Fleet.of(request.app.state.runtime.settings)


RuntimeDep = Annotated[Runtime, Depends(get_runtime)]
FleetDep = Annotated[Fleet, Depends(get_fleet)]
SettingsDep = Annotated[Settings, Depends(get_settings)]
DbDep = Annotated[Database, Depends(get_db)]
WriterDep = Annotated[Writer, Depends(get_writer)]
ClockDep = Annotated[Callable[[], datetime], Depends(get_clock)]


async def get_credentials(request: Request) -> Credentials:
    """Token and user operations that drop this server's cached credentials on a change."""
    runtime = request.app.state.runtime
    return Credentials(runtime.db, runtime.auth)


CredentialsDep = Annotated[Credentials, Depends(get_credentials)]
