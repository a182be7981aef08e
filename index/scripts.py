"""The index's Lua scripts: called by SHA, sent whole (EVAL) when a node lacks them (a restart, a
node of a Redis Cluster that never saw them), which also loads them there."""

from __future__ import annotations

from importlib.resources import files
from typing import Any

from redis.exceptions import NoScriptError

_LUA = files("kvgate.index") / "lua"


class LuaScript:
    """One script (the shared prelude + its body), called with one key (the group's anchor, which
    routes the call on a Redis Cluster) and string ARGV."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.source = (_LUA / "common.lua").read_text() + "\n" + (_LUA / f"{name}.lua").read_text()
        self.sha = ""

    async def load(self, client: Any) -> None:
        """SCRIPT LOAD (on every primary of a cluster); after it a call costs one round trip."""
        self.sha = await client.script_load(self.source)

    async def __call__(self, client: Any, key: str, *args: str | int | bytes) -> object:
        if not self.sha:
            await self.load(client)
        try:
            return await client.evalsha(self.sha, 1, key, *args)
        except NoScriptError:
            return await client.eval(self.source, 1, key, *args)

    def queue(self, pipe: Any, key: str, *args: str | int | bytes) -> None:
        """Adds the call to a pipeline (see :func:`run_group_calls` for the NOSCRIPT retry). Sent as a
        raw command: a Redis Cluster pipeline refuses ``evalsha()`` but routes this by its key."""
        pipe.execute_command("EVALSHA", self.sha, 1, key, *args)


class IndexScripts:
    """All scripts of the Redis index."""

    def __init__(self) -> None:
        self.lookup = LuaScript("lookup")
        self.apply = LuaScript("apply")
        self.stage = LuaScript("stage")
        self.commit = LuaScript("commit")
        self.register = LuaScript("register")
        self.heartbeat = LuaScript("heartbeat")
        self.deregister = LuaScript("deregister")
        self.purge = LuaScript("purge")
        self.add_pending = LuaScript("add_pending")
        self.workers = LuaScript("workers")

    async def load_all(self, client: Any) -> None:
        for script in vars(self).values():
            await script.load(client)


async def run_group_calls(client: Any, script: LuaScript, calls: list[tuple[str, tuple]]) -> list[Any]:
    """``script`` once per (key, args) in ``calls``, pipelined: one round trip on one Redis, one per
    node (in parallel) on a Redis Cluster. A call whose node lacks the script is re-sent whole."""
    if not script.sha:
        await script.load(client)
    pipe = client.pipeline(transaction=False)
    for key, args in calls:
        script.queue(pipe, key, *args)
    replies = await pipe.execute(raise_on_error=False)
    for i, reply in enumerate(replies):
        if isinstance(reply, NoScriptError):
            key, args = calls[i]
            replies[i] = await client.eval(script.source, 1, key, *args)
        elif isinstance(reply, Exception):
            raise reply
    return replies
