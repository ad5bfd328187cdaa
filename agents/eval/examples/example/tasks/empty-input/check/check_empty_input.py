import unittest

from report import line
from stats import summary


class EmptyCheck(unittest.TestCase):
    def test_empty_summary(self):
        self.assertEqual(summary([]), {"count": 0, "min": None, "max": None, "mean": None})

    def test_empty_line(self):
        self.assertEqual(line([]), "no values")

    def test_values_unchanged(self):
        self.assertEqual(summary([4]), {"count": 1, "min": 4, "max": 4, "mean": 4})
        self.assertEqual(line([1, 2]), "2 values, mean 1.5 (min 1, max 2)")
