import doctest
import unittest

import mathutil


def load_tests(loader, tests, ignore):
    tests.addTests(doctest.DocTestSuite(mathutil))
    return tests


class LerpTest(unittest.TestCase):
    def test_ends(self):
        self.assertEqual(mathutil.lerp(2, 4, 0), 2)
        self.assertEqual(mathutil.lerp(2, 4, 1), 4)


if __name__ == "__main__":
    unittest.main()
