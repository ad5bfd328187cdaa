import unittest

from geometry import distance, format_point
from report import describe


class GeometryTest(unittest.TestCase):
    def test_distance(self):
        self.assertEqual(distance((0, 0), (3, 4)), 5)

    def test_format_point(self):
        self.assertEqual(format_point((1.5, 2)), "(1.5, 2)")

    def test_describe(self):
        square = [(0, 0), (1, 0), (1, 1), (0, 1)]
        self.assertEqual(describe(square), "(0, 0) -> (1, 0) -> (1, 1) -> (0, 1): perimeter 4.00")


if __name__ == "__main__":
    unittest.main()
