import ast
import pathlib
import unittest


class ExtractCheck(unittest.TestCase):
    def test_helper(self):
        from names import normalize_name

        self.assertEqual(normalize_name("  Ada   Lovelace "), "ada-lovelace")
        self.assertEqual(normalize_name("X"), "x")

    def test_callers_use_it(self):
        for name in ("users.py", "teams.py"):
            src = pathlib.Path(name).read_text()
            self.assertNotIn(".lower()", src, f"{name} still normalises inline")
            calls = [n for n in ast.walk(ast.parse(src))
                     if isinstance(n, ast.Call) and getattr(n.func, "id", getattr(n.func, "attr", "")) == "normalize_name"]
            self.assertTrue(calls, f"{name} does not call normalize_name")

    def test_behaviour_unchanged(self):
        from teams import add_member, team_key
        from users import same_user, user_key

        self.assertEqual(user_key(" Grace  Hopper"), "grace-hopper")
        self.assertTrue(same_user("A B", "a  b"))
        self.assertEqual(team_key("Red  Team"), "red-team")
        self.assertEqual(add_member([], " New  Member"), ["new-member"])
        self.assertEqual(add_member(["a-b"], "A B"), ["a-b"])
