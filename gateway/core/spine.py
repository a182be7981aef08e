"""The request spine, written once for every front: authenticate -> scope -> tokenize -> hash ->
route -> dispatch -> usage.

A front (OpenAI or Anthropic over HTTP, or the gRPC service) only translates: its wire request into
a :class:`~kvgate.gateway.core.request.GenerateRequest`, its credentials into a caller
(:meth:`RequestCore.authenticate`), and the text stream or the routing decision back to its wire
form; every :class:`~kvgate.gateway.errors.GatewayError` to its own status by its own table.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

import numpy as np

from kvgate.gateway.core.admission import InFlightGate
from kvgate.gateway.core.auth import Authenticator
from kvgate.gateway.core.call_formats import HERMES, CallFormat, CallReading
from kvgate.gateway.core.constraints import ConstraintChecker
from kvgate.gateway.core.jobs import JobBuilder
from kvgate.gateway.core.models import ModelCatalog
from kvgate.gateway.core.prompts import PromptEncoder
from kvgate.gateway.core.request import ChatInput, GenerateRequest
from kvgate.gateway.core.scope import cache_scope
from kvgate.gateway.core.textgen import TextDelta, TextDone, TextGenerator
from kvgate.gateway.diagnosis.record import Scope
from kvgate.gateway.diagnosis.recorder import CacheDiagnostics, Finished
from kvgate.gateway.errors import ErrorKind, GatewayError
from kvgate.gateway.routing.types import Routed
from kvgate.gateway.settings import GatewaySettings
from kvgate.gateway.tenancy import Caller
from kvgate.gateway.upstream.dispatch import Dispatcher
from kvgate.gateway.upstream.job import Job


class RequestCore:
    """Owned by the composition root; shared by every front of one gateway. Its services are built
    once and passed in; it keeps no per-request state of its own (``diagnostics``, when given, keeps
    its record of finished requests)."""

    def __init__(
        self,
        settings: GatewaySettings,
        auth: Authenticator,
        gate: InFlightGate,
        encoder: PromptEncoder,
        jobs: JobBuilder,
        dispatcher: Dispatcher,
        generator: TextGenerator,
        constraints: ConstraintChecker,
        diagnostics: CacheDiagnostics | None = None,
        call_formats: tuple[CallFormat, ...] = (HERMES,),
    ) -> None:
        self.settings = settings
        self.auth = auth
        self.gate = gate
        self._encoder = encoder
        self._jobs = jobs
        self._dispatcher = dispatcher
        self._generator = generator
        self._constraints = constraints
        self._diagnostics = diagnostics
        self._call_formats = call_formats
        self.models = ModelCatalog(settings.model_name, dispatcher.adapters)

    @property
    def model_name(self) -> str:
        return self.settings.model_name

    def ready_workers(self, adapter_id: str = "") -> int:
        """Workers requests (of LoRA adapter ``adapter_id``, when set) can be sent to now
        (quarantined ones included: the last resort)."""
        return self._dispatcher.routable_count(adapter_id)

    def call_reading(self, names: frozenset[str] | None) -> CallReading | None:
        """How the calls to ``names`` (a request's declared functions) are read from its answer, in
        the formats the served model writes; None when no calls are read (``names`` None)."""
        return None if names is None else CallReading(names, self._call_formats)

    def authenticate(self, headers: Mapping[str, str], count: bool = True) -> Caller:
        """1. The caller of a front's lower-cased headers or metadata; UNAUTHENTICATED for a bad key.
        With ``count`` (every generation and dry run) the request counts against its tenant's rate
        limit, however it ends: RATE_LIMITED, before anything else is read, past it."""
        caller = self.auth.credentials(headers)
        if count:
            self.auth.count(caller)
        return caller

    async def prepare(self, request: GenerateRequest, caller: Caller, *, charge: bool = True) -> Job:
        """2-4. Scope, tokenize and hash ``request`` into a job (its model name may select a LoRA
        adapter: see :class:`ModelCatalog`). NOT_FOUND for a model not served,
        INVALID_REQUEST for anything the client got wrong, PERMISSION_DENIED for a namespace the
        tenant may not use, RATE_LIMITED / TOKENS_LIMITED past the tenant's token allowance (checked
        and charged only when ``charge``: a dry run generates no tokens). An output constraint that
        cannot be compiled is INVALID_REQUEST naming ``request.constraint_param``."""
        adapter = self.models.resolve(request.model)
        ids = await self._encoder.encode(request.prompt)
        if request.keep_last is not None:
            ids = ids[-request.keep_last :]  # what is cut cannot match a breakpoint or a shared prefix
        hint = request.cache_hint
        if isinstance(request.prompt, ChatInput) and request.prompt.breakpoints:
            hint = await self._encoder.breakpoint_hint(ids, request.prompt.breakpoints)
        shared = await self._shared_prefix(request, caller, ids)
        self._jobs.check_hint(hint)
        room = self._jobs.check_size(ids)
        sampling = self._jobs.sampling(request, len(ids), room)
        await self._constraints.check(sampling.constraint, request.constraint_param)
        scope = cache_scope(caller, request.client_salt, shared, self.settings.cache, adapter)
        if charge:
            self._jobs.charge(caller, len(ids) + sampling.max_tokens)
        return self._jobs.job(request, ids, sampling, scope, hint, caller.tenant.name)

    def generate(self, job: Job) -> AsyncIterator[TextDelta | TextDone]:
        """5-7. Route, dispatch (failing over before the first token) and account usage: text deltas
        then one TextDone. UpstreamError subclasses propagate; closing the iterator early cancels the
        request on its worker. A request that ends is recorded for diagnosis before its TextDone is
        yielded (a client that has its usage can ask why at once)."""
        stream = self._generator.stream(job)
        return stream if self._diagnostics is None else self._recorded(job, stream)

    def diagnosis(self, caller: Caller, request_id: str) -> dict[str, Any]:
        """Why ``caller``'s request ``request_id`` reused the cached tokens it did (see
        :mod:`kvgate.gateway.diagnosis`); NOT_FOUND for an id its tenant has no record of (another
        tenant's included: their existence is not revealed)."""
        found = self._diagnostics.report(caller.tenant.name, request_id) if self._diagnostics else None
        if found is None:
            raise GatewayError(f"No request `{request_id}` of yours is on record for diagnosis.",
                               ErrorKind.NOT_FOUND, param="request_id", code="request_not_found")  # fmt: skip
        return found

    async def _recorded(
        self, job: Job, stream: AsyncIterator[TextDelta | TextDone]
    ) -> AsyncIterator[TextDelta | TextDone]:
        async with contextlib.aclosing(stream) as items:
            async for item in items:
                if isinstance(item, TextDone) and self._diagnostics is not None:
                    await self._diagnostics.finished(self._finished(job, item))
                yield item

    def _finished(self, job: Job, done: TextDone) -> Finished:
        scope = Scope(self.settings.model_name, job.adapter_id, job.cache_salt, job.shared_salt)
        return Finished(
            job.request_id,
            job.tenant,
            scope,
            job.token_ids,
            job.hashes,
            done.usage,
            done.routed,
            done.attempts,
        )

    def prompt_text(self, job: Job) -> str:
        """The text of ``job``'s prompt as the model reads it (special tokens shown), for an echo."""
        return self._generator.decode(job.token_ids.tolist())

    async def route(self, job: Job) -> Routed:
        """The decision :meth:`generate` would make now, recording nothing (the dry run)."""
        return await self._dispatcher.preview(job)

    def enter(self) -> None:
        """Takes an in-flight slot for one generation (give it back with :meth:`leave`); OVERLOADED
        when the gateway is at its bound."""
        if not self.gate.try_enter():
            raise self.gate.overloaded()

    def leave(self) -> None:
        self.gate.leave()

    async def _shared_prefix(self, request: GenerateRequest, caller: Caller, ids: np.ndarray) -> int | None:
        """Tokens of the leading system messages when the caller opted into a shared namespace; None
        when it did not, or when the prompt has no such structure (not a chat)."""
        if caller.namespace is None or not isinstance(request.prompt, ChatInput):
            return None
        return await self._encoder.system_prefix(request.prompt.messages, ids)
