import inspect
import pathlib
import re
import unittest


class DefaultCheck(unittest.TestCase):
    def test_library(self):
        import fetch

        self.assertEqual(fetch.DEFAULT_TIMEOUT, 10)
        self.assertEqual(inspect.signature(fetch.fetch).parameters["timeout"].default, 10)

    def test_cli(self):
        import cli

        self.assertEqual(cli.parser().parse_args(["x"]).timeout, 10)
        self.assertIn("default 10", " ".join(cli.parser().format_help().split()))

    def test_readme(self):
        text = pathlib.Path("README.md").read_text()
        self.assertIn("10 seconds", text)
        self.assertNotIn("30", text)

    def test_no_thirty_left(self):
        left = [p.name for p in sorted(pathlib.Path(".").glob("*.py"))
                if not p.name.startswith("check_") and re.search(r"\b30\b", p.read_text())]
        self.assertEqual(left, [], "these files still say 30")
