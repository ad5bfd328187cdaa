# Arbor's judge of a hidden check run by a Python test runner: it runs the runner itself and
# reports, on the stderr it had before any code of the tree ran, what the runner ran. The
# daemon takes the check to pass only when the command exits 0 *and* this report, with the
# nonce it was given, says tests ran and none failed: a module of the tree that exits 0 on
# import (os._exit or SystemExit) or prints a runner's summary leaves no such report.
#
#   python3 judge.py unittest|pytest ARGS...
#   python3 judge.py script PATH ARGS...   (a check script: run as __main__, the tree last on
#                                           the path; its exit code is its verdict)
import json
import os
import sys


def _reporter():
    nonce = os.environ.pop("ARBOR_JUDGE_NONCE", "")
    out = os.fdopen(os.dup(2), "w")

    def report(**kw):
        out.write("\nARBOR-JUDGE %s %s\n" % (nonce, json.dumps(kw, sort_keys=True)))
        out.flush()

    return report


report = _reporter()
del _reporter

# Isolated: the standard library and installed packages come before anything of the tree;
# the checkout (the working directory) is searched last, and this script's dir not at all.
_here = os.path.dirname(os.path.abspath(__file__))
_cwd = os.getcwd()
sys.path[:] = [p for p in sys.path if p not in ("", ".", _cwd, _here)]
sys.path.append(_cwd)

runner, args = sys.argv[1], sys.argv[2:]
if runner == "script":
    import runpy

    # The script's directory, as Python would put it first, goes after the standard library.
    _dir = os.path.dirname(os.path.abspath(args[0]))
    if _dir not in sys.path:
        sys.path.insert(len(sys.path) - 1, _dir)
    sys.argv = args
    runpy.run_path(args[0], run_name="__main__")
    sys.exit(0)
ok = False
try:
    if runner == "unittest":
        import unittest

        prog = unittest.main(module=None, argv=["python3 -m unittest"] + args, exit=False)
        r = prog.result
        report(runner="unittest", ran=r.testsRun, failures=len(r.failures), errors=len(r.errors),
               unexpectedSuccesses=len(r.unexpectedSuccesses), skipped=len(r.skipped))
        ok = r.wasSuccessful() and r.testsRun > len(r.skipped)
    elif runner == "pytest":
        import pytest

        class _Count:
            passed = failed = errors = skipped = 0

            def pytest_runtest_logreport(self, report):
                if report.failed:
                    self.failed += 1
                elif report.skipped:
                    self.skipped += 1
                elif report.when == "call" and report.passed:
                    self.passed += 1

            def pytest_collectreport(self, report):
                if report.failed:
                    self.errors += 1

        c = _Count()
        code = pytest.main(args + ["-p", "no:cacheprovider", "--import-mode=append"], plugins=[c])
        report(runner="pytest", exitCode=int(code), passed=c.passed, failed=c.failed,
               errors=c.errors, skipped=c.skipped)
        ok = int(code) == 0 and c.passed > 0 and c.failed == 0 and c.errors == 0
    else:
        report(error="unknown runner %r" % runner)
except SystemExit as e:
    # Not the runner's own exit (both are called not to exit): code of the tree ended it.
    report(runner=runner, exited=repr(e.code))
    os._exit(1)
sys.exit(0 if ok else 1)
