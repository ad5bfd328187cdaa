import unittest

from pages import page_path
from textutil import old_slugify, slugify, words


class TextutilTest(unittest.TestCase):
    def test_slugify(self):
        self.assertEqual(slugify("Hello, World!"), "hello-world")

    def test_old_slugify(self):
        self.assertEqual(old_slugify("Hello World"), "hello_world")

    def test_words(self):
        self.assertEqual(words(" a  b "), ["a", "b"])

    def test_page_path(self):
        self.assertEqual(page_path("About Us"), "/pages/about-us.html")


if __name__ == "__main__":
    unittest.main()
