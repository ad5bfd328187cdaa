import unittest

from duration import parse_duration


class DurationCheck(unittest.TestCase):
    def test_combined(self):
        self.assertEqual(parse_duration("1h30m"), 5400)
        self.assertEqual(parse_duration("2m5s"), 125)
        self.assertEqual(parse_duration("1h1m1s"), 3661)

    def test_single_units_still_work(self):
        self.assertEqual(parse_duration("90s"), 90)
        self.assertEqual(parse_duration(" 2h "), 7200)

    def test_bad_input_is_still_rejected(self):
        for bad in ["", "   ", "abc", "5", "1h30", "h", "1x"]:
            with self.subTest(text=bad):
                with self.assertRaises(ValueError):
                    parse_duration(bad)
