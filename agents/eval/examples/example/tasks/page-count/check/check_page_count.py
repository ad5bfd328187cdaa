import unittest

from api import listing
from pager import page_count


class PageCountCheck(unittest.TestCase):
    def test_page_count(self):
        self.assertEqual(page_count(25), 3)
        self.assertEqual(page_count(1), 1)
        self.assertEqual(page_count(11), 2)

    def test_exact_multiples(self):
        self.assertEqual(page_count(10), 1)
        self.assertEqual(page_count(20), 2)
        self.assertEqual(page_count(6, per_page=3), 2)

    def test_listing_has_pages(self):
        self.assertEqual(listing(list(range(25)), 1)["pages"], 3)
        self.assertEqual(listing(list(range(20)), 2)["pages"], 2)
        self.assertEqual(listing(list(range(7)), 1, per_page=7)["items"], list(range(7)))
