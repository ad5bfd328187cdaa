import os
import subprocess
import sys
import tempfile
import unittest


class LinesFlagCheck(unittest.TestCase):
    def run_wc(self, *args):
        r = subprocess.run([sys.executable, "wc.py", *args], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout

    def setUp(self):
        fd, self.path = tempfile.mkstemp(suffix=".txt")
        with os.fdopen(fd, "w") as f:
            f.write("one two\nthree\nfour five six\n")
        self.addCleanup(os.remove, self.path)

    def test_lines(self):
        self.assertEqual(self.run_wc("--lines", self.path), f"3 {self.path}\n")

    def test_lines_after_the_files(self):
        self.assertEqual(self.run_wc(self.path, "--lines"), f"3 {self.path}\n")

    def test_words_by_default(self):
        self.assertEqual(self.run_wc(self.path), f"6 {self.path}\n")
