import unittest

from textlines import head


class HeadTest(unittest.TestCase):
    def test_head(self):
        self.assertEqual(head(["a", "b", "c"], 2), ["a", "b"])

    def test_head_short(self):
        self.assertEqual(head(["a"], 5), ["a"])


if __name__ == "__main__":
    unittest.main()
