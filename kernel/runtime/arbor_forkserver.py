"""Arbor's fork server: imports ipykernel and the Arbor runtime once, then forks a kernel per
request, so a kernel starts in a fraction of the time of a fresh interpreter.

Protocol on stdin/stdout, one JSON object per line. It prints {"ready": true} once imported.
Request: {"id", "conn", "cwd", "env": {...}, "log"}; reply: {"id", "pid"} or {"id", "error"}.
Nothing imported before the fork may start threads or create zmq contexts; each child gets
its own session (setsid, so it leads its process group), cwd, environment, log, and RNG seed.
"""
import json
import os
import signal
import sys
import traceback


def die_with_parent(parent):
    """Ask for SIGKILL when the fork server dies (it dies with the daemon), so no kernel
    outlives the daemon holding its namespace; if the server is already gone, go now."""
    try:
        import ctypes
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    if os.getppid() != parent:
        os._exit(1)


def child(req, parent):
    die_with_parent(parent)
    os.setsid()
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    fd = os.open(req["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    sys.stdin = open(os.devnull)
    os.chdir(req["cwd"])
    os.environ.clear()
    os.environ.update(req["env"])
    import random

    random.seed()
    import arbor_kernel

    sys.argv = [arbor_kernel.__file__, req["conn"]]
    arbor_kernel.main(req["conn"])


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    if here not in sys.path:
        sys.path.append(here)
    # The expensive part of a kernel start, done once (without debugpy, as arbor_kernel does).
    sys.modules["debugpy"] = None
    import ipykernel.kernelapp  # noqa: F401
    import ipykernel.ipkernel  # noqa: F401
    import IPython  # noqa: F401
    import arbor_kernel  # noqa: F401
    import arbor_runtime  # noqa: F401
    import arbor_snapshot  # noqa: F401

    if sys.modules.get("debugpy", 0) is None:
        del sys.modules["debugpy"]
    try:  # snapshots and restores of __main__ functions and classes need it; import it once
        import dill  # noqa: F401
    except ImportError:
        pass

    # Children are reaped automatically; Arbor watches them with pidfds.
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    out = sys.stdout
    out.write(json.dumps({"ready": True}) + "\n")
    out.flush()
    for line in sys.stdin:
        try:
            req = json.loads(line)
        except ValueError:
            continue
        server = os.getpid()
        try:
            pid = os.fork()
        except OSError as e:
            out.write(json.dumps({"id": req.get("id"), "error": f"fork: {e}"}) + "\n")
            out.flush()
            continue
        if pid == 0:
            code = 1
            try:
                child(req, server)
                code = 0
            except SystemExit as e:
                code = e.code if isinstance(e.code, int) else 1
            except BaseException:
                traceback.print_exc()
            finally:
                os._exit(code)
        out.write(json.dumps({"id": req.get("id"), "pid": pid}) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
