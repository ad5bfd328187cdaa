"""Namespace snapshots for Arbor kernels.

take() pickles each user variable on its own — plain pickle first (fast), dill only for values
pickle refuses or that refer to __main__ (functions and classes defined in the kernel, which must
travel by value) — so one unpicklable value (a socket, a generator) skips only itself, with the
reason in the manifest. A name for an object already saved under another name is recorded as an
alias, so `b = a` is still one object after a restore. Files are written temp -> fsync -> rename -> fsync dir; the manifest is
renamed last and names its data file, so a crash leaves the previous snapshot intact.
"""
import importlib
import json
import os
import pickle
import re
import tempfile
import time
import types

_ALWAYS_SKIP = {"In", "Out", "get_ipython", "exit", "quit", "open"}
# IPython's own names: output and input caches (_, __, _5, _i, _ii5, _ih, _oh, _dh), the last
# shell command's exit code, and module dunders. Other underscore names are the user's.
_IPYTHON_NAMES = re.compile(r"_{1,3}|_i{1,3}|_i?\d+|_ih|_oh|_dh|_exit_code|__\w+__")


def _fsync_dir(d):
    fd = os.open(d, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic_write(path, data):
    """Write data (bytes, or a list of bytes) to path: temp, fsync, rename, fsync dir."""
    d = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(dir=d, prefix=".tmp-")
    try:
        with os.fdopen(fd, "wb") as f:
            for chunk in (data if isinstance(data, list) else [data]):
                f.write(chunk)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(d)


def _dump(val):
    why = "refers to __main__"
    try:
        data = pickle.dumps(val, protocol=pickle.HIGHEST_PROTOCOL)
        if b"__main__" not in data:
            return data, "pickle", None
    except Exception as e:
        why = f"pickle: {type(e).__name__}: {e}"
    try:
        import dill
    except ImportError:
        return None, None, why + "; dill is not installed (apt install python3-dill)"
    try:
        # recurse=False: a function defined in the kernel keeps __main__'s namespace as its
        # globals (by reference), so after a restore it sees the live values, not copies taken
        # at snapshot time.
        return dill.dumps(val, protocol=pickle.HIGHEST_PROTOCOL, recurse=False), "dill", None
    except Exception as e:
        return None, None, f"{type(e).__name__}: {e}"[:300]


def _typename(v):
    t = type(v)
    return t.__qualname__ if t.__module__ in ("builtins", "__main__") else f"{t.__module__}.{t.__qualname__}"


def take(shell, dirpath, max_var, max_total):
    """Snapshot shell.user_ns into dirpath; returns the manifest dict."""
    t0 = time.monotonic()
    os.makedirs(dirpath, mode=0o700, exist_ok=True)
    ns, hidden = shell.user_ns, shell.user_ns_hidden
    kept, skipped, blobs, total = [], [], [], 0
    first = {}  # id(value) -> the first name saved with it: `b = a` stays one object
    for name, val in list(ns.items()):
        if name in _ALWAYS_SKIP or _IPYTHON_NAMES.fullmatch(name):
            continue
        if name in hidden and hidden[name] is val:
            continue
        ent = {"name": name, "type": _typename(val)}
        if isinstance(val, types.ModuleType):
            ent.update(method="import", module=val.__name__)
            kept.append(ent)
            continue
        if id(val) in first:
            kept.append(dict(ent, method="alias", of=first[id(val)]))
            continue
        data, method, reason = _dump(val)
        if data is None:
            skipped.append(dict(ent, reason=reason))
            continue
        if len(data) > max_var:
            skipped.append(dict(ent, bytes=len(data), reason=f"{len(data)} bytes exceeds the per-variable cap of {max_var}"))
            continue
        if total + len(data) > max_total:
            skipped.append(dict(ent, bytes=len(data), reason=f"would exceed the snapshot cap of {max_total} bytes"))
            continue
        first[id(val)] = name
        kept.append(dict(ent, method=method, bytes=len(data), offset=total))
        blobs.append(data)
        total += len(data)
    # One data file of concatenated pickles, addressed by offset from the manifest: no second
    # serialization of the whole namespace, and restore slices it without copying.
    data_name = f"data-{time.time_ns():x}.bin"
    _atomic_write(os.path.join(dirpath, data_name), blobs)
    man = {
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        # The last cell this snapshot reflects: a restore can then say which later cells' work
        # is not in it.
        "cell": max(int(getattr(shell, "execution_count", 1) or 1) - 1, 0),
        "data": data_name,
        "vars": kept,
        "skipped": skipped,
        "total_bytes": total,
        "seconds": round(time.monotonic() - t0, 4),
    }
    _atomic_write(os.path.join(dirpath, "manifest.json"), json.dumps(man).encode())
    for f in os.listdir(dirpath):
        if f.startswith("data-") and f != data_name:
            try:
                os.unlink(os.path.join(dirpath, f))
            except OSError:
                pass
    return man


def restore(ns, dirpath, report_path=""):
    """Load a snapshot into ns; write what was and was not restored to report_path."""
    t0 = time.monotonic()
    report = {"vars": [], "skipped": [], "source": dirpath}
    try:
        with open(os.path.join(dirpath, "manifest.json"), "rb") as f:
            man = json.load(f)
        with open(os.path.join(dirpath, man["data"]), "rb") as f:
            blob = memoryview(f.read())
        report["created"] = man.get("created")
        report["cell"] = man.get("cell", 0)
        report["skipped"] = list(man.get("skipped", []))
        for ent in man.get("vars", []):
            name, method = ent["name"], ent.get("method")
            off, n = ent.get("offset", 0), ent.get("bytes", 0)
            data = blob[off:off + n]
            try:
                if len(data) != n:
                    raise ValueError("truncated data file")
                if method == "import":
                    ns[name] = importlib.import_module(ent["module"])
                elif method == "alias":
                    if ent["of"] not in ns:
                        raise ValueError(f"{ent['of']}, which it names too, was not restored")
                    ns[name] = ns[ent["of"]]
                elif method == "dill":
                    import dill

                    ns[name] = dill.loads(data)
                elif method == "pickle":
                    ns[name] = pickle.loads(data)
                else:
                    raise ValueError("missing from the data file")
                report["vars"].append(ent)
            except Exception as e:
                report["skipped"].append(dict(ent, reason=f"restore failed: {type(e).__name__}: {e}"[:300]))
    except Exception as e:
        report["error"] = f"{type(e).__name__}: {e}"
    report["seconds"] = round(time.monotonic() - t0, 4)
    if report_path:
        _atomic_write(report_path, json.dumps(report).encode())
    return report
