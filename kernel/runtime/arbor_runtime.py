"""Arbor's runtime inside every kernel: the host bridge client and the Python surface the model
uses (rlm, agent_message, harness, refine, goal, heartbeat, arbor_ping, ArborError; _SURFACE lists them).

Every call is an async request over a per-session Unix socket to the daemon, newline-delimited
JSON: {"id":N,"method":M,"params":{...}} answered by {"id":N,"result":R} or
{"id":N,"error":{"message":S}}. The first line a client sends is {"token": ...}. One connection is
opened lazily per event loop and multiplexes any number of concurrent requests, so tasks that
outlive their cell keep working. Only the standard library is used.
"""
import asyncio
import json
import os

__all__ = ["ArborError", "Handle"]

_MAX_LINE = 1 << 28


class ArborError(Exception):
    """A request to the Arbor daemon failed; the message says why."""


class _Conn:
    def __init__(self, reader, writer):
        self.reader = reader
        self.writer = writer
        self.pending = {}
        self.next_id = 0
        self.closed = False
        self.task = asyncio.get_running_loop().create_task(self._read())

    async def _read(self):
        why = "the Arbor bridge closed"
        try:
            while True:
                line = await self.reader.readline()
                if not line:
                    break
                msg = json.loads(line)
                if msg.get("id") is None and msg.get("error"):
                    why = msg["error"].get("message") or why
                    break
                fut = self.pending.pop(msg.get("id"), None)
                if fut is None or fut.done():
                    continue
                err = msg.get("error")
                if err is not None:
                    fut.set_exception(ArborError(err.get("message") or "host error"))
                else:
                    fut.set_result(msg.get("result"))
        except Exception as e:  # the connection is unusable; fail every waiter with the reason
            why = f"the Arbor bridge failed: {e!r}"
        finally:
            self.closed = True
            for fut in self.pending.values():
                if not fut.done():
                    fut.set_exception(ArborError(why))
            self.pending.clear()
            try:
                self.writer.close()
            except Exception:
                pass

    async def call(self, method, params):
        if self.closed:
            raise ArborError("the Arbor bridge closed")
        self.next_id += 1
        rid = self.next_id
        fut = asyncio.get_running_loop().create_future()
        self.pending[rid] = fut
        try:
            self.writer.write(
                json.dumps({"id": rid, "method": method, "params": params}).encode() + b"\n"
            )
            if self.writer.transport.get_write_buffer_size() > (1 << 20):
                await self.writer.drain()
            return await fut
        finally:
            self.pending.pop(rid, None)


class _CommConn:
    """The bridge over the kernel's own Jupyter connection, for a kernel on a gateway (which
    cannot reach the daemon's socket). Requests go out as comm_msg on iopub, carrying the same
    {"id","method","params"} frames; the daemon answers with comm_msg on the control channel,
    which ipykernel serves on its own thread even while a cell runs (a reply on shell would
    wait behind the cell that awaits it). Replies are handed to the awaiting task's loop."""

    def __init__(self, kernel, comm_id):
        import threading

        self.kernel = kernel
        self.comm_id = comm_id
        self.pending = {}
        self.next_id = 0
        self.lock = threading.Lock()
        self.closed = False
        prev = kernel.control_handlers.get("comm_msg")

        def on_control(stream, ident, msg):
            content = msg.get("content") or {}
            if content.get("comm_id") != comm_id:
                if prev is not None:
                    return prev(stream, ident, msg)
                return None
            self._deliver(content.get("data") or {})
            return None

        kernel.control_handlers["comm_msg"] = on_control

    def _deliver(self, msg):
        with self.lock:
            entry = self.pending.pop(msg.get("id"), None)
        if entry is None:
            return
        loop, fut = entry
        err = msg.get("error")

        def settle():
            if fut.done():
                return
            if err is not None:
                fut.set_exception(ArborError(err.get("message") or "host error"))
            else:
                fut.set_result(msg.get("result"))

        try:
            loop.call_soon_threadsafe(settle)
        except RuntimeError:  # the loop is closed: nobody waits any more
            pass

    async def call(self, method, params):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        with self.lock:
            self.next_id += 1
            rid = self.next_id
            self.pending[rid] = (loop, fut)
        try:
            self.kernel.session.send(
                self.kernel.iopub_socket, "comm_msg",
                {"comm_id": self.comm_id, "data": {"id": rid, "method": method, "params": params}},
                ident=b"comm-" + self.comm_id.encode(),
            )
            return await fut
        finally:
            with self.lock:
                self.pending.pop(rid, None)


_comm = None  # the _CommConn when the bridge runs over the Jupyter connection


def use_comm(kernel, comm_id):
    """Carry host requests over the kernel's Jupyter connection (see _CommConn)."""
    global _comm
    _comm = _CommConn(kernel, comm_id)


_conns = {}  # event loop -> _Conn or the task opening it


async def _open():
    path = os.environ.get("ARBOR_BRIDGE")
    token = os.environ.get("ARBOR_BRIDGE_TOKEN", "")
    if not path:
        raise ArborError("no Arbor host bridge in this kernel (ARBOR_BRIDGE is not set)")
    try:
        reader, writer = await asyncio.open_unix_connection(path, limit=_MAX_LINE)
    except OSError as e:
        raise ArborError(f"cannot reach the Arbor host bridge at {path}: {e}") from None
    writer.write(json.dumps({"token": token}).encode() + b"\n")
    return _Conn(reader, writer)


async def _conn():
    if _comm is not None:
        return _comm
    loop = asyncio.get_running_loop()
    c = _conns.get(loop)
    if isinstance(c, _Conn) and not c.closed:
        return c
    if not isinstance(c, asyncio.Task) or (c.done() and (c.cancelled() or c.exception() is not None)):
        c = loop.create_task(_open())
        _conns[loop] = c
    # shield: one caller being cancelled must not cancel the open other callers wait for.
    conn = await asyncio.shield(c)
    if _conns.get(loop) is c:
        _conns[loop] = conn
    return conn


async def call(method, params=None):
    """Send one request to the daemon and return its result; raises ArborError on failure."""
    conn = await _conn()
    return await conn.call(method, params if params is not None else {})


# ---- Python surface ---------------------------------------------------------------------------


class Handle:
    """A subagent session started with rlm(); its results arrive as messages, not here."""

    __slots__ = ("id", "name", "branch", "worktree", "model", "state", "info")

    def __init__(self, d):
        d = dict(d or {})
        self.info = d
        self.id = d.get("id")
        self.name = d.get("name")
        self.branch = d.get("branch")
        self.worktree = d.get("worktree")
        self.model = d.get("model")
        self.state = d.get("state")

    def __repr__(self):
        parts = [f"id={self.id!r}", f"name={self.name!r}", f"branch={self.branch!r}", f"model={self.model!r}"]
        if self.state is not None:
            parts.append(f"state={self.state!r}")
        return "Handle(" + ", ".join(parts) + ")"


def _choice(arg, value, allowed):
    if value not in allowed:
        raise ValueError(f"{arg}={value!r}: expected one of {', '.join(map(repr, allowed))}")
    return value


def _text(arg, value, optional=False):
    if value is None and optional:
        return None
    if not isinstance(value, str) or not value.strip():
        raise TypeError(f"{arg} must be a non-empty string, got {value!r}")
    return value


_ROLES = ("parent", "child", "sibling")
_MODES = ("auto", "steer", "follow_up")


def _ref(h):
    if isinstance(h, Handle):
        return h.id
    if isinstance(h, str) and h:
        return h
    raise TypeError(f"expected a Handle, a session id or a name, got {type(h).__name__}")


class _RLM:
    """await rlm(task, name=None, model=None, spec=None) starts a child agent session."""

    async def __call__(self, task, name=None, model=None, spec=None):
        _text("task", task)
        _text("name", name, optional=True)
        _text("model", model, optional=True)
        d = await call("rlm.spawn", {"task": task, "name": name, "model": model, "spec": spec})
        return Handle(d)

    async def list_subagents(self):
        return [Handle(d) for d in (await call("rlm.list", {}) or [])]

    async def stop(self, h):
        return await call("rlm.stop", {"id": _ref(h)})

    async def merge(self, h):
        return await call("rlm.merge", {"id": _ref(h)})

    def __repr__(self):
        return "<rlm: await rlm(task, name=None, model=None, spec=None); .list_subagents() .stop(h) .merge(h)>"


class _AgentMessage:
    async def send(self, text, receiver_role="parent", receiver_name=None, mode="auto"):
        _text("text", text)
        _choice("receiver_role", receiver_role, _ROLES)
        _text("receiver_name", receiver_name, optional=True)
        _choice("mode", mode, _MODES)
        return await call("agent_message.send", {
            "text": text, "receiver_role": receiver_role, "receiver_name": receiver_name, "mode": mode,
        })

    async def list_agents(self):
        return await call("agent_message.list_agents", {})

    async def inbox(self):
        return await call("agent_message.inbox", {})

    def __repr__(self):
        return "<agent_message: .send(text, receiver_role='parent', receiver_name=None, mode='auto') .list_agents() .inbox()>"


_SCOPES = ("session", "workspace", "global")


class _HarnessKind:
    """One kind of harness entry: await .create/.get/.update/.delete/.list/.search/.history."""

    def __init__(self, kind, plural):
        self._kind, self._plural = kind, plural

    def _fields(self, title, body, module, spec):
        f = {}
        if title is not None:
            f["title"] = _text("title", title)
        if body is not None:
            f["body"] = body
        if module is not None:
            f["module"] = _text("module", module)
        if spec is not None:
            if not isinstance(spec, dict):
                raise TypeError(f"spec must be a dict like {{'instructions': ...}}, got {type(spec).__name__}")
            f["spec"] = spec
        return f

    async def create(self, id, title, body=None, module=None, spec=None, scope="session"):
        _text("id", id)
        _choice("scope", scope, _SCOPES)
        e = dict(self._fields(title, body, module, spec), kind=self._kind, id=id)
        return await call("harness.put", {"entry": e, "version": "", "scope": scope})

    async def get(self, id, scope=None):
        _text("id", id)
        if scope is not None:
            _choice("scope", scope, _SCOPES)
        return await call("harness.get", {"kind": self._kind, "id": id, "scope": scope})

    async def update(self, id, title=None, body=None, module=None, spec=None, version=None, scope="session"):
        """Change the fields given. version is the one you read (a stale one is refused);
        without it, the current version is read first."""
        _text("id", id)
        _choice("scope", scope, _SCOPES)
        cur = await call("harness.get", {"kind": self._kind, "id": id, "scope": scope})
        e = {k: cur.get(k) for k in ("kind", "id", "title", "body", "module", "spec") if cur.get(k) is not None}
        e.update(self._fields(title, body, module, spec))
        return await call("harness.put", {"entry": e, "version": version or cur["version"], "scope": scope})

    async def delete(self, id, version=None, scope="session"):
        _text("id", id)
        _choice("scope", scope, _SCOPES)
        if version is None:
            version = (await call("harness.get", {"kind": self._kind, "id": id, "scope": scope}))["version"]
        return await call("harness.delete", {"kind": self._kind, "id": id, "version": version, "scope": scope})

    async def list(self, scope=None):
        if scope is not None:
            _choice("scope", scope, _SCOPES)
        return await call("harness.list", {"kind": self._kind, "scope": scope})

    async def search(self, query, limit=20):
        _text("query", query)
        return await call("harness.search", {"kind": self._kind, "query": query, "limit": int(limit)})

    async def history(self, id, scope="session"):
        _text("id", id)
        _choice("scope", scope, _SCOPES)
        return await call("harness.history", {"kind": self._kind, "id": id, "scope": scope})

    def __repr__(self):
        return (f"<harness.{self._plural}: await .create(id, title, ...) .get(id) .update(id, ..., version=None) "
                ".delete(id) .list() .search(query) .history(id)>")


class _Harness:
    """The continual harness: harness.notes, .memories, .skills, .subagents."""

    def __init__(self):
        self.notes = _HarnessKind("note", "notes")
        self.memories = _HarnessKind("memory", "memories")
        self.skills = _HarnessKind("skill", "skills")
        self.subagents = _HarnessKind("subagent", "subagents")

    def __repr__(self):
        return "<harness: .notes .memories .skills .subagents (session-scope edits apply at the next turn)>"


class _Refine:
    """/refine: await refine.run(focus, scope="session") asks a model to propose minimal harness
    edits from what went wrong since the last refine; the scope's policy decides each one
    (applied at the next turn, or waiting for the user's review)."""

    async def run(self, focus="", scope="session"):
        if focus:
            _text("focus", focus)
        _choice("scope", scope, _SCOPES)
        return await call("refine.run", {"focus": focus, "scope": scope})

    def __repr__(self):
        return '<refine: await .run(focus="", scope="session"|"workspace"|"global")>'


def _budget(arg, value, kind):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, kind) or value != value or value <= 0:
        raise ValueError(f"{arg}={value!r}: expected a number above zero (or None for no limit)")
    return value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(arg, value):
    """A wall budget: seconds, or a string such as "90s", "30m", "2h"."""
    if value is None:
        return None
    if isinstance(value, str):
        v = value.strip()
        if len(v) < 2 or v[-1] not in _UNITS:
            raise ValueError(f"{arg}={value!r}: expected seconds or a duration such as '30m' or '2h'")
        try:
            value = float(v[:-1]) * _UNITS[v[-1]]
        except ValueError:
            raise ValueError(f"{arg}={value!r}: expected seconds or a duration such as '30m' or '2h'") from None
    return _budget(arg, value, (int, float))


class _Goal:
    """A goal keeps this session taking turns until it is met: await goal.set(objective,
    token_budget=, turn_budget=, wall_budget="2h", cost_budget=), then goal.complete(evidence=)
    when it is achieved; goal.get() shows it. Budgets count this session and all its subagents."""

    async def set(self, objective, token_budget=None, turn_budget=None, wall_budget=None, cost_budget=None, replace=False):
        _text("objective", objective)
        p = {"objective": objective, "replace": bool(replace)}
        for k, v in (("token_budget", _budget("token_budget", token_budget, int)),
                     ("turn_budget", _budget("turn_budget", turn_budget, int)),
                     ("wall_budget", _seconds("wall_budget", wall_budget)),
                     ("cost_budget", _budget("cost_budget", cost_budget, (int, float)))):
            if v is not None:
                p[k] = v
        return await call("goal.set", p)

    async def complete(self, evidence=""):
        if not isinstance(evidence, str):
            raise TypeError(f"evidence must be a string, got {type(evidence).__name__}")
        return await call("goal.complete", {"evidence": evidence})

    async def get(self):
        return await call("goal.get", {})

    def __repr__(self):
        return ('<goal: await .set(objective, token_budget=None, turn_budget=None, wall_budget=None, '
                'cost_budget=None, replace=False) .complete(evidence="") .get()>')
class _Heartbeat:
    """Heartbeats: an instruction delivered to this session as a message on a schedule.
    Each carries its run number; ticks that come while the session is busy wait and arrive as
    one message saying how many it stands for."""

    async def create(self, instruction, every=None, cron=None):
        _text("instruction", instruction)
        if (every is None) == (cron is None):
            raise TypeError('give exactly one of every="10m" or cron="*/15 * * * *"')
        _text("every", every, optional=True)
        _text("cron", cron, optional=True)
        return await call("heartbeat.create", {"instruction": instruction, "every": every or "", "cron": cron or ""})

    async def list(self):
        return await call("heartbeat.list", {})

    async def delete(self, id):
        _text("id", id)
        return await call("heartbeat.delete", {"id": id})

    def __repr__(self):
        return '<heartbeat: await .create(instruction, every="10m" | cron="*/15 * * * *") .list() .delete(id)>'


async def arbor_ping(payload=None):
    """Round-trip payload through the daemon (tests and benchmarks)."""
    return await call("ping", {"payload": payload})


# The names every kernel's namespace gets, each with the bridge methods it may call: a new
# feature adds its object here, and its methods to bridgeMethods in kernel/bridge.go (a test
# checks the two agree). Only what works goes in: a name in the namespace tells the model it
# can use it, so a feature that is not built has no object at all.
_SURFACE = {
    "rlm": (_RLM, ("rlm.spawn", "rlm.list", "rlm.stop", "rlm.merge")),
    "agent_message": (_AgentMessage, ("agent_message.send", "agent_message.list_agents", "agent_message.inbox")),
    "arbor_ping": (lambda: arbor_ping, ("ping",)),
    "harness": (_Harness, ("harness.list", "harness.get", "harness.put", "harness.delete", "harness.search", "harness.history")),
    "refine": (_Refine, ("refine.run",)),
    "goal": (_Goal, ("goal.set", "goal.complete", "goal.get")),
    "heartbeat": (_Heartbeat, ("heartbeat.create", "heartbeat.list", "heartbeat.delete")),
    "ArborError": (lambda: ArborError, ()),
}


def surface():
    """The names the runtime puts into the user namespace."""
    return {name: make() for name, (make, _) in _SURFACE.items()}


def methods():
    """The bridge methods the surface calls, sorted."""
    return sorted(m for _, ms in _SURFACE.values() for m in ms)


def patch_kernel(kernel):
    """Make SIGINT stop a cell stuck in an await.

    ipykernel 6.17 cancels an async cell on SIGINT through tornado's add_callback, which never
    runs while the cell awaits (measured: a cell awaiting an Event ignores interrupts forever).
    Cancelling the cell's future with call_soon_threadsafe on the running loop works.
    """
    import contextlib
    import signal

    @contextlib.contextmanager
    def cancel_on_sigint(future):
        loop = asyncio.get_event_loop()

        def handle(*_):
            loop.call_soon_threadsafe(future.cancel)

        save = signal.signal(signal.SIGINT, handle)
        try:
            yield
        finally:
            signal.signal(signal.SIGINT, save)

    if hasattr(kernel, "_cancel_on_sigint"):
        kernel._cancel_on_sigint = cancel_on_sigint


class _SkillsFinder:
    """Finds the package arbor_skills in $ARBOR_SKILLS, read at import time (a pooled kernel
    gets its environment after boot). The daemon rewrites the package at each turn boundary."""

    @classmethod
    def find_spec(cls, name, path=None, target=None):
        root = os.environ.get("ARBOR_SKILLS")
        if name != "arbor_skills" or not root:
            return None
        import importlib.machinery
        return importlib.machinery.PathFinder.find_spec(name, [root])


def boot(shell, restore_dir=""):
    """Restore a snapshot (if any) into the user namespace, then install the surface."""
    import sys
    if _SkillsFinder not in sys.meta_path:
        sys.meta_path.append(_SkillsFinder)
    if restore_dir:
        import arbor_snapshot

        arbor_snapshot.restore(shell.user_ns, restore_dir, os.environ.pop("ARBOR_RESTORE_REPORT", ""))
    names = surface()
    shell.user_ns.update(names)
    # Hidden names are left out of %who and of snapshots.
    shell.user_ns_hidden.update(names)
