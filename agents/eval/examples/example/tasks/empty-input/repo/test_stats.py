import unittest

from report import line
from stats import summary


class StatsTest(unittest.TestCase):
    def test_summary(self):
        self.assertEqual(summary([1, 2, 6]), {"count": 3, "min": 1, "max": 6, "mean": 3})

    def test_line(self):
        self.assertEqual(line([1, 2]), "2 values, mean 1.5 (min 1, max 2)")


if __name__ == "__main__":
    unittest.main()
