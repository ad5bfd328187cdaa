import os
import pathlib
import tempfile
import unittest

from cli import parser
from fetch import fetch


class FetchTest(unittest.TestCase):
    def test_file_url(self):
        with tempfile.TemporaryDirectory() as d:
            p = pathlib.Path(d, "page.txt")
            p.write_text("hello")
            self.assertEqual(fetch(p.as_uri()), b"hello")

    def test_default_timeout(self):
        self.assertEqual(parser().parse_args(["x"]).timeout, 30)


if __name__ == "__main__":
    unittest.main()
