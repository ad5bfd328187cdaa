import unittest

from records import parse_line
from totals import first_name, total


class RecordsTest(unittest.TestCase):
    def test_parse_line(self):
        self.assertEqual(parse_line("ann, 3"), ("ann", 3))

    def test_total(self):
        self.assertEqual(total(["ann,3", "", "bob,4"]), 7)

    def test_first_name(self):
        self.assertEqual(first_name("zed,9"), "zed")


if __name__ == "__main__":
    unittest.main()
