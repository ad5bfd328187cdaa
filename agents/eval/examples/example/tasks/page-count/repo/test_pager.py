import unittest

from api import listing
from pager import page


class PagerTest(unittest.TestCase):
    def test_page(self):
        items = list(range(25))
        self.assertEqual(page(items, 1), list(range(10)))
        self.assertEqual(page(items, 3), [20, 21, 22, 23, 24])

    def test_listing(self):
        self.assertEqual(listing(list(range(3)), 1, per_page=2)["items"], [0, 1])


if __name__ == "__main__":
    unittest.main()
