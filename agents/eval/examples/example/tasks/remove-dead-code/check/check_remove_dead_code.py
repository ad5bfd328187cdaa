import pathlib
import subprocess
import sys
import unittest


class DeadCodeCheck(unittest.TestCase):
    def test_removed(self):
        import textutil

        for name in ("old_slugify", "_legacy_split"):
            self.assertFalse(hasattr(textutil, name), f"textutil still has {name}")
        left = [p.name for p in sorted(pathlib.Path(".").glob("*.py"))
                if not p.name.startswith("check_") and ("old_slugify" in p.read_text() or "_legacy_split" in p.read_text())]
        self.assertEqual(left, [], "these files still mention the dead code")

    def test_the_rest_works(self):
        import pages
        import textutil

        self.assertEqual(textutil.slugify("A  B!"), "a-b")
        self.assertEqual(textutil.words("x y"), ["x", "y"])
        self.assertEqual(pages.page_path("Hi There"), "/pages/hi-there.html")
        self.assertEqual(pages.word_count("one two three"), 3)

    def test_project_tests_run(self):
        r = subprocess.run([sys.executable, "-m", "unittest", "-q", "test_textutil"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
