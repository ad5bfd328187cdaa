import unittest

from wc import count_words


class CountTest(unittest.TestCase):
    def test_words(self):
        self.assertEqual(count_words("one two  three\nfour"), 4)

    def test_empty(self):
        self.assertEqual(count_words(""), 0)


if __name__ == "__main__":
    unittest.main()
