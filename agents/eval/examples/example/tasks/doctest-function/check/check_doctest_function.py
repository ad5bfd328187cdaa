import doctest
import unittest

import mathutil


class ClampCheck(unittest.TestCase):
    def test_clamp(self):
        self.assertEqual(mathutil.clamp(5, 0, 10), 5)
        self.assertEqual(mathutil.clamp(-1, 0, 10), 0)
        self.assertEqual(mathutil.clamp(11, 0, 10), 10)
        self.assertEqual(mathutil.clamp(0, 0, 10), 0)
        self.assertEqual(mathutil.clamp(10, 0, 10), 10)
        self.assertEqual(mathutil.clamp(0.5, 0.0, 1.0), 0.5)

    def test_clamp_has_doctests(self):
        tests = [t for t in doctest.DocTestFinder().find(mathutil) if t.name == "mathutil.clamp"]
        self.assertEqual(len(tests), 1, "clamp has no docstring")
        self.assertGreaterEqual(len(tests[0].examples), 2, "clamp's docstring has fewer than two examples")

    def test_doctests_pass(self):
        result = doctest.testmod(mathutil)
        self.assertEqual(result.failed, 0)
        self.assertGreaterEqual(result.attempted, 3)
