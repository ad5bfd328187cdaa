import unittest

from duration import parse_duration
from scheduler import every


class DurationTest(unittest.TestCase):
    def test_units(self):
        self.assertEqual(parse_duration("90s"), 90)
        self.assertEqual(parse_duration("5m"), 300)
        self.assertEqual(parse_duration("2h"), 7200)

    def test_every(self):
        self.assertEqual(every("1m"), {"interval": 60})


if __name__ == "__main__":
    unittest.main()
