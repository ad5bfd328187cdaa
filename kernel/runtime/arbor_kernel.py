"""Arbor's kernel launcher: boots an IPKernelApp, restores a namespace snapshot, installs the
Arbor runtime into the user namespace, then serves. Usage: python arbor_kernel.py CONNECTION_FILE
"""
import os
import sys


def main(conn):
    here = os.path.dirname(os.path.abspath(__file__))
    # Like ipykernel_launcher: the launcher's own directory is not the user's import path;
    # the kernel's cwd (the worktree) is.
    if sys.path and os.path.abspath(sys.path[0] or ".") == here:
        sys.path[0] = ""
    sys.path.append(here)
    # ipykernel imports debugpy (~0.2 s, a fifth of a boot) only to offer a debugger Arbor
    # never uses; make that import fail during boot, and let user code import it later.
    blocked = "debugpy" not in sys.modules
    if blocked:
        sys.modules["debugpy"] = None
    from ipykernel.kernelapp import IPKernelApp

    IPKernelApp.clear_instance()  # a forked child starts from a clean singleton
    app = IPKernelApp.instance()
    # History goes to a per-kernel in-memory database: Arbor keeps its own log, and hundreds of
    # kernels committing to one shared ~/.ipython history.sqlite after every cell cost latency.
    app.initialize(["-f", conn, "--IPKernelApp.quiet=True", "--HistoryManager.enabled=False"])
    if blocked and sys.modules.get("debugpy", 0) is None:
        del sys.modules["debugpy"]
    import arbor_runtime

    restore = os.environ.pop("ARBOR_RESTORE", "")
    arbor_runtime.patch_kernel(app.kernel)
    arbor_runtime.boot(app.shell, restore)
    app.start()


if __name__ == "__main__":
    main(sys.argv[1])
