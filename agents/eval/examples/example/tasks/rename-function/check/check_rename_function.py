import pathlib
import re
import unittest


class RenameCheck(unittest.TestCase):
    def test_new_name(self):
        import records

        self.assertEqual(records.parse_record("ann, 3"), ("ann", 3))
        self.assertFalse(hasattr(records, "parse_line"), "records.py still defines parse_line")

    def test_callers_work(self):
        import totals

        self.assertEqual(totals.total(["a,1", "b,2"]), 3)
        self.assertEqual(totals.first_name("zed,9"), "zed")

    def test_old_name_is_gone(self):
        left = [p.name for p in sorted(pathlib.Path(".").glob("*.py"))
                if not p.name.startswith("check_") and re.search(r"\bparse_line\b", p.read_text())]
        self.assertEqual(left, [], "parse_line is still used in these files")
