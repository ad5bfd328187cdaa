import unittest

from units import c_to_f, f_to_c


class UnitsTest(unittest.TestCase):
    def test_c_to_f(self):
        self.assertEqual(c_to_f(100), 212)
        self.assertEqual(c_to_f(-40), -40)

    def test_f_to_c(self):
        self.assertEqual(f_to_c(32), 0)


if __name__ == "__main__":
    unittest.main()
