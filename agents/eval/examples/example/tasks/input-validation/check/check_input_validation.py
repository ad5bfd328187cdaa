import unittest

from units import c_to_f, f_to_c


class ValidationCheck(unittest.TestCase):
    def test_numbers_still_convert(self):
        self.assertEqual(c_to_f(100), 212)
        self.assertEqual(c_to_f(36.6), 36.6 * 9 / 5 + 32)
        self.assertEqual(f_to_c(212), 100)

    def test_not_a_number(self):
        for fn in (c_to_f, f_to_c):
            for bad, kind in (("20", "str"), (None, "NoneType"), ([1], "list")):
                with self.subTest(fn=fn.__name__, value=bad):
                    with self.assertRaises(TypeError) as cm:
                        fn(bad)
                    msg = str(cm.exception)
                    self.assertIn("number", msg)
                    self.assertIn(kind, msg)
