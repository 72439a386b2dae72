"""Run a real Pulumi program fully offline and capture every resource registration.

``run_program(program, stack=..., config=...)`` runs ``program`` the way the Pulumi language
host does (``pulumi.runtime.stack.run_in_stack``: a real root ``pulumi:pulumi:Stack``, so
``pulumi.export`` works), against ``FakeCloud`` with ``preview=False``, waits for every
registration and every Output, and returns a ``Plan`` (see ``capture``).

Isolation: each run happens on its own short-lived thread, in an empty ``contextvars.Context``
with a fresh event loop, fresh Settings / config / root stack and a fresh FakeCloud. Pulumi
keeps its runtime state in ContextVars, so nothing reaches the caller's context. One SDK quirk
needs undoing by hand: ``ContextProperty.fset`` rewrites the property's *process-wide default*
whenever it is set while unset (so the first ``Settings(monitor=...)`` makes that monitor the
default for every context); the defaults are snapshotted before a run and restored after.
Runs are serialised by a lock.

Determinism: the SDK sends each RPC through ``loop.run_in_executor``. With the default thread
pool, registrations reach the monitor in a thread-scheduling-dependent order; here the loop's
default executor runs each call inline on the loop thread, so registration order (and the
FakeCloud ids that depend on it only for duplicate names) is the same on every run. The inline
executor is also what makes a 40-resource plan take milliseconds.

The monitor subclasses the SDK's ``MockMonitor`` but owns RegisterResource / ReadResource /
Invoke / RegisterResourceOutputs, because those must see the raw request (protect, parent,
dependencies, ...) and keep secret markers, which ``MockResourceArgs`` drops.
"""
from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import json
import logging
import threading
from typing import Any, Callable, Mapping, Optional

from google.protobuf import empty_pb2
from pulumi.runtime import config as pulumi_config
from pulumi.runtime import resource as pulumi_resource
from pulumi.runtime import settings as pulumi_settings
from pulumi.runtime.mocks import MockCallArgs, MockEngine, MockMonitor, MockResourceArgs
from pulumi.runtime.proto import engine_pb2, provider_pb2, resource_pb2
from pulumi.runtime import stack as pulumi_stack
from pulumi.runtime.stack import run_in_stack

from aicluster.offline.capture import (
    STACK_TYPE,
    CapturedResource,
    LogEntry,
    Plan,
    Secret,
    contains_secret,
    plain_to_struct,
    reveal,
    struct_to_plain,
)
from aicluster.offline.mocks import FakeCloud

__all__ = ["run_program", "encode_config", "DuplicateResourceError"]

_log = logging.getLogger("aicluster.offline")
_RUN_LOCK = threading.Lock()


def _aliases(request) -> tuple[str, ...]:
    """The earlier identities a resource declares (ResourceOptions.aliases): the alias's type, or
    its URN, whichever way the SDK sent it, so tests can check that a type change is an update."""
    specs = tuple(a.spec.type or a.urn for a in getattr(request, "aliases", ()))
    return specs + tuple(getattr(request, "aliasURNs", ()))


class DuplicateResourceError(RuntimeError):
    """Two resources registered the same URN; `pulumi up` would fail the same way."""


# ---------------------------------------------------------------- config


def encode_config(config: Mapping[str, object]) -> tuple[dict[str, str], list[str]]:
    """Full keys ("aicluster:cluster") -> the strings the engine would pass, plus secret keys.

    Strings pass as-is, bools as "true"/"false", numbers as str(), dicts/lists as JSON (how
    Pulumi passes structured config). Wrap a value in ``Secret`` to make it a secret config key.
    """
    out: dict[str, str] = {}
    secret_keys: list[str] = []
    for key, value in config.items():
        if ":" not in key:
            raise ValueError(f"config key {key!r} must be a full key such as 'aicluster:{key}'")
        if isinstance(value, Secret):
            secret_keys.append(key)
            value = value.value
        if value is None:
            continue
        if isinstance(value, str):
            out[key] = value
        elif isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, (int, float)):
            out[key] = str(value)
        else:
            out[key] = json.dumps(reveal(value))
    return out, secret_keys


# ---------------------------------------------------------------- monitor / engine


class _InlineExecutor(concurrent.futures.ThreadPoolExecutor):
    """Runs submitted calls immediately on the calling (event loop) thread."""

    def __init__(self) -> None:
        super().__init__(max_workers=1)

    def submit(self, fn, /, *args, **kwargs):  # type: ignore[override]
        future: concurrent.futures.Future = concurrent.futures.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the awaiting coroutine
            future.set_exception(exc)
        return future


class _CaptureEngine(MockEngine):
    def __init__(self) -> None:
        super().__init__(_log)
        self.entries: list[LogEntry] = []

    def Log(self, request):  # noqa: N802 - gRPC method name
        if request.severity == engine_pb2.DEBUG:  # the SDK's own per-RPC chatter
            return
        severity = engine_pb2.LogSeverity.Name(request.severity).lower()
        self.entries.append(LogEntry(severity, request.message, request.urn or None))
        _log.debug("%s: %s", severity, request.message)


class CaptureMonitor(MockMonitor):
    """SDK MockMonitor that records every request and answers with FakeCloud state."""

    def __init__(self, cloud: FakeCloud) -> None:
        super().__init__(cloud)
        self._records: dict[str, dict[str, Any]] = {}  # urn -> CapturedResource fields
        self.stack_outputs: dict = {}
        self.notes: list[LogEntry] = []

    # -- helpers
    def make_urn(self, parent: str, type_: str, name: str) -> str:
        """URNs as the real engine builds them: children of the root stack do not carry the
        stack's type, deeper children carry the parent's full qualified type chain (the SDK's
        MockMonitor keeps only the parent's last type and always prepends the stack)."""
        if parent:
            parent_type = parent.split("::")[2]
            if parent_type != STACK_TYPE:
                type_ = f"{parent_type}${type_}"
        return f"urn:pulumi:{pulumi_settings.get_stack()}::{pulumi_settings.get_project()}::{type_}::{name}"

    def _record(self, urn: str, request, *, custom: bool, rid: Optional[str], inputs: dict,
                outputs: dict, read: bool = False) -> None:
        if urn in self._records:
            raise DuplicateResourceError(
                f"duplicate resource URN {urn!r}: two resources of type {request.type} are "
                f"named {request.name!r} under the same parent type"
            )
        self._records[urn] = dict(
            urn=urn, type=request.type, name=request.name,
            parent_urn=request.parent or None, custom=custom, id=rid or None,
            inputs=inputs, outputs=outputs,
            protect=bool(getattr(request, "protect", False)),
            retain_on_delete=bool(getattr(request, "retainOnDelete", False)),
            provider=request.provider or None,
            dependencies=tuple(sorted(request.dependencies)),
            ignore_changes=tuple(getattr(request, "ignoreChanges", ())),
            replace_on_changes=tuple(getattr(request, "replaceOnChanges", ())),
            delete_before_replace=bool(getattr(request, "deleteBeforeReplace", False)),
            additional_secret_outputs=tuple(request.additionalSecretOutputs),
            import_id=getattr(request, "importId", "") or None,
            read=read,
            aliases=_aliases(request),
        )

    def _create(self, request, inputs: dict, resource_id: Optional[str]) -> tuple[str, dict]:
        rid, state = self.mocks.new_resource(MockResourceArgs(
            typ=request.type, name=request.name, inputs=reveal(inputs),
            provider=request.provider, resource_id=resource_id, custom=True,
        ))
        state = dict(state or {})
        # The engine keeps a property secret when its input was secret or the resource asked.
        secret_keys = set(request.additionalSecretOutputs)
        secret_keys.update(k for k, v in inputs.items() if contains_secret(v))
        for key in secret_keys:
            if key in state and not isinstance(state[key], Secret):
                state[key] = Secret(reveal(state[key]))
        return rid or "", state

    def plan(self, project: str, stack: str, log: list[LogEntry]) -> Plan:
        return Plan(
            project=project, stack=stack,
            resources=[CapturedResource(**fields) for fields in self._records.values()],
            outputs=self.stack_outputs, log=self.notes + log,
        )

    # -- gRPC surface
    def RegisterResource(self, request):  # noqa: N802
        urn = self.make_urn(request.parent, request.type, request.name)
        inputs = struct_to_plain(request.object)
        if len(request.transforms):
            self.notes.append(LogEntry(
                "warning", f"{request.type} {request.name!r}: resource transforms are not run "
                "by offline plans", urn))
        if request.type == STACK_TYPE or not request.custom:
            self._record(urn, request, custom=False, rid=None, inputs=inputs, outputs={})
            return resource_pb2.RegisterResourceResponse(urn=urn)
        rid, state = self._create(request, inputs, request.importId or None)
        self._record(urn, request, custom=True, rid=rid, inputs=inputs, outputs=state)
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, rid, reveal(state))
        return resource_pb2.RegisterResourceResponse(urn=urn, id=rid, object=plain_to_struct(state))

    def ReadResource(self, request):  # noqa: N802
        urn = self.make_urn(request.parent, request.type, request.name)
        inputs = struct_to_plain(request.properties)
        rid, state = self._create(request, inputs, request.id or None)
        self._record(urn, request, custom=True, rid=rid, inputs=inputs, outputs=state, read=True)
        self.resources[urn] = MockMonitor.ResourceRegistration(urn, rid, reveal(state))
        return resource_pb2.ReadResourceResponse(urn=urn, properties=plain_to_struct(state))

    def RegisterResourceOutputs(self, request):  # noqa: N802
        outputs = struct_to_plain(request.outputs)
        record = self._records.get(request.urn)
        if record is not None and record["type"] == STACK_TYPE:
            self.stack_outputs = outputs
        elif record is not None:
            record["outputs"] = outputs
        return empty_pb2.Empty()

    def Invoke(self, request):  # noqa: N802
        args = reveal(struct_to_plain(request.args))
        if request.tok == "pulumi:pulumi:getResource":
            found = self.resources.get(args.get("urn"))
            if found is None:
                raise KeyError(f"offline plan: unknown resource {args.get('urn')!r}")
            ret, failures = {"urn": found.urn, "id": found.id, "state": found.state}, []
        else:
            answer = self.mocks.call(MockCallArgs(token=request.tok, args=args, provider=request.provider))
            ret, failures = (answer, []) if isinstance(answer, dict) else (answer[0], answer[1] or [])
        return resource_pb2.ResourceInvokeResponse(
            failures=[provider_pb2.CheckFailure(property=p, reason=r) for p, r in failures],
            **{"return": plain_to_struct(ret)},
        )

    def RegisterStackTransform(self, request):  # noqa: N802
        self.notes.append(LogEntry("warning", "stack transforms are not run by offline plans"))
        return super().RegisterStackTransform(request)


# ---------------------------------------------------------------- running


async def _wait_for_rpcs(await_all_outstanding_tasks: bool = True) -> None:
    """``pulumi.runtime.stack.wait_for_rpcs`` step for step, but waiting for the outstanding
    outputs in one ``asyncio.wait(FIRST_EXCEPTION)`` per batch instead of one
    ``asyncio.wait(FIRST_COMPLETED)`` per completed output. The SDK's loop registers a callback on
    every pending output each time one finishes, which is quadratic in the number of outputs and
    was a third of a plan's time; here each output gets one. Errors surface as before: the first
    failed output is re-raised. Used only for offline runs (`pulumi up` runs the SDK's own)."""
    rpc_manager = pulumi_settings._get_rpc_manager()
    outputs = pulumi_settings.SETTINGS
    while True:
        while len(rpc_manager.rpcs) > 0:
            await asyncio.sleep(0)
            try:
                await rpc_manager.rpcs.pop()
            except Exception as exn:
                if rpc_manager.unhandled_exception is not None:
                    raise exn from rpc_manager.unhandled_exception.with_traceback(rpc_manager.exception_traceback)
                raise
        if rpc_manager.unhandled_exception is not None:
            raise rpc_manager.unhandled_exception.with_traceback(rpc_manager.exception_traceback)
        if await_all_outstanding_tasks:
            while True:
                with outputs.lock:
                    if len(outputs.outputs) == 0:
                        break
                    pending = list(outputs.outputs)
                    outputs.outputs.clear()
                done, not_done = await asyncio.wait(pending, return_when=asyncio.FIRST_EXCEPTION)
                for task in done:
                    await task
                if not_done:
                    with outputs.lock:
                        outputs.outputs.update(not_done)
        if len(rpc_manager.rpcs) == 0:
            break


def _context_properties() -> list[Any]:
    return [v for v in vars(pulumi_settings.Settings).values() if hasattr(v, "_ContextProperty__default")]


def _run_on_this_thread(program: Callable[[], Any], project: str, stack: str,
                        config: Mapping[str, object]) -> Plan:
    strings, secret_keys = encode_config(config)
    cloud = FakeCloud(strings)
    monitor = CaptureMonitor(cloud)
    engine = _CaptureEngine()
    loop = asyncio.new_event_loop()
    loop.set_default_executor(_InlineExecutor())
    # A failed registration leaves resolver futures nobody awaits; the error itself reaches the
    # caller, so keep asyncio's "exception was never retrieved" echoes out of stderr.
    loop.set_exception_handler(lambda _loop, ctx: _log.debug("asyncio: %s", ctx.get("message")))
    asyncio.set_event_loop(loop)
    try:
        # Constructing Settings sets every runtime ContextVar in this (fresh) context.
        pulumi_settings.Settings(
            project=project, stack=stack, monitor=monitor, engine=engine, dry_run=False,
            legacy_apply_enabled=False, organization="organization", root_directory=None,
        )
        pulumi_settings.ROOT.set(None)
        pulumi_config.set_all_config(strings, secret_keys)
        loop.run_until_complete(run_in_stack(program))
        return monitor.plan(project, stack, engine.entries)
    finally:
        pending = [t for t in asyncio.all_tasks(loop) if not t.done()]
        for task in pending:
            task.cancel()
        if pending:
            loop.run_until_complete(asyncio.gather(*pending, return_exceptions=True))
        loop.run_until_complete(loop.shutdown_asyncgens())
        asyncio.set_event_loop(None)
        loop.close()


def _no_stack_trace():
    """Stands in for the SDK's ``_get_stack_trace`` during an offline run. The SDK walks and encodes
    the Python stack of every registration (~1 ms each, a tenth of a plan's program time) for the
    engine's diagnostics; the capture monitor never reads it, so an offline run sends none."""
    from pulumi.runtime.proto import source_pb2     # an SDK with stack traces has it

    return source_pb2.StackTrace()


def run_program(program: Callable[[], None], *, stack: str, config: dict[str, object],
                project: str = "aicluster") -> Plan:
    """Run ``program`` offline under FakeCloud and return everything it registered.

    An exception raised by the program (or by an Output it created) propagates unchanged.
    """
    if not callable(program):
        raise TypeError(f"program must be callable, got {type(program).__name__}")
    outcome: dict[str, Any] = {}

    def worker() -> None:
        try:
            outcome["plan"] = contextvars.Context().run(
                _run_on_this_thread, program, project, stack, dict(config or {}))
        except BaseException as exc:  # noqa: BLE001 - re-raised on the caller's thread
            outcome["error"] = exc

    with _RUN_LOCK:
        properties = _context_properties()
        defaults = [p._ContextProperty__default for p in properties]
        sdk_wait, pulumi_stack.wait_for_rpcs = pulumi_stack.wait_for_rpcs, _wait_for_rpcs
        # Only for this run, under the lock, restored below: a real `pulumi up` keeps its traces. A
        # private name of the SDK's: an SDK without it (pyproject allows any 3.x) just keeps its traces.
        sdk_trace = getattr(pulumi_resource, "_get_stack_trace", None)
        if sdk_trace is not None:
            pulumi_resource._get_stack_trace = _no_stack_trace
        try:
            thread = threading.Thread(target=worker, name=f"aicluster-plan-{stack}", daemon=True)
            thread.start()
            thread.join()
        finally:
            pulumi_stack.wait_for_rpcs = sdk_wait
            if sdk_trace is not None:
                pulumi_resource._get_stack_trace = sdk_trace
            for prop, default in zip(properties, defaults):
                prop._ContextProperty__default = default
    if "error" in outcome:
        error = outcome.pop("error")
        try:
            raise error
        finally:
            del error
    return outcome["plan"]
