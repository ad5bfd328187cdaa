import unittest

from show import last_lines
from textlines import tail


class TailCheck(unittest.TestCase):
    def test_last_n(self):
        lines = ["a", "b", "c", "d", "e"]
        self.assertEqual(tail(lines, 3), ["c", "d", "e"])
        self.assertEqual(tail(lines, 1), ["e"])
        self.assertEqual(tail(lines, 5), lines)

    def test_fewer_than_n(self):
        self.assertEqual(tail(["a", "b"], 5), ["a", "b"])

    def test_last_lines(self):
        self.assertEqual(last_lines("1\n2\n3\n4", 2), "3\n4")
