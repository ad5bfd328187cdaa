"""Reference figures from Python's jupyter_client against the same ipykernel, for
`arbor bench kernel`. Usage: jc_bench.py launch N | exec N | stdout MB N
Prints one JSON object: durations in seconds."""
import json
import sys
import time

import jupyter_client


def start():
    km = jupyter_client.KernelManager()
    km.start_kernel(env={"PYDEVD_DISABLE_FILE_VALIDATION": "1", **__import__("os").environ})
    kc = km.client()
    kc.start_channels()
    kc.wait_for_ready(timeout=60)
    return km, kc


def stop(km, kc):
    kc.stop_channels()
    km.shutdown_kernel(now=True)


def run(kc, code):
    """Execute and wait for the return to idle and the reply, as Arbor's Execute does."""
    mid = kc.execute(code, stop_on_error=False)
    while True:
        m = kc.get_iopub_msg(timeout=120)
        if m["parent_header"].get("msg_id") == mid and m["msg_type"] == "status" \
                and m["content"]["execution_state"] == "idle":
            break
    while kc.get_shell_msg(timeout=120)["parent_header"].get("msg_id") != mid:
        pass


def main():
    what, n = sys.argv[1], int(sys.argv[2])
    reps = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    out = {}
    if what == "launch":
        ds = []
        for _ in range(n):
            t = time.perf_counter()
            km, kc = start()
            ds.append(time.perf_counter() - t)
            stop(km, kc)
        out["launch"] = ds
    elif what == "exec":
        km, kc = start()
        for _ in range(10):
            run(kc, "1+1")
        ds = []
        for _ in range(n):
            t = time.perf_counter()
            run(kc, "1+1")
            ds.append(time.perf_counter() - t)
        out["exec"] = ds
        stop(km, kc)
    elif what == "stdout":
        km, kc = start()
        run(kc, "import sys; s = 'x' * (%d << 20)" % n)
        ds = []
        for _ in range(reps):
            t = time.perf_counter()
            run(kc, "sys.stdout.write(s); sys.stdout.flush()")
            ds.append(time.perf_counter() - t)
        out["stdout"] = ds
        stop(km, kc)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
