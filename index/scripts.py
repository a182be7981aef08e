"""The index's Lua scripts: loaded once, called by SHA, reloaded if Redis lost them (restart)."""

from __future__ import annotations

from importlib.resources import files

from redis.asyncio import Redis
from redis.exceptions import NoScriptError

_LUA = files("kvgate.index") / "lua"


class LuaScript:
    """One script (the shared prelude + its body), called with no KEYS and string ARGV."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = (_LUA / "common.lua").read_text() + "\n" + (_LUA / f"{name}.lua").read_text()
        self._sha: str | None = None

    async def load(self, client: Redis) -> None:
        """SCRIPT LOAD; after it a call costs exactly one round trip."""
        self._sha = await client.script_load(self.source)

    async def __call__(self, client: Redis, *args: str | int) -> object:
        if self._sha is None:
            await self.load(client)
        try:
            return await client.evalsha(self._sha, 0, *args)
        except NoScriptError:
            await self.load(client)
            return await client.evalsha(self._sha, 0, *args)


class IndexScripts:
    """All scripts of the Redis index."""

    def __init__(self) -> None:
        self.lookup = LuaScript("lookup")
        self.apply = LuaScript("apply")
        self.resync = LuaScript("resync")
        self.register = LuaScript("register")
        self.heartbeat = LuaScript("heartbeat")
        self.deregister = LuaScript("deregister")
        self.purge = LuaScript("purge")
        self.add_pending = LuaScript("add_pending")

    async def load_all(self, client: Redis) -> None:
        for script in vars(self).values():
            await script.load(client)
