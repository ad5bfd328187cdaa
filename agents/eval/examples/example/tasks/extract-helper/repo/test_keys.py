import unittest

from teams import add_member, team_key
from users import same_user, user_key


class KeysTest(unittest.TestCase):
    def test_user_key(self):
        self.assertEqual(user_key("  Ada   Lovelace "), "ada-lovelace")
        self.assertTrue(same_user("Ada Lovelace", "ada  lovelace"))

    def test_teams(self):
        self.assertEqual(team_key("Core Team"), "core-team")
        self.assertEqual(add_member(["ada-lovelace"], "Ada Lovelace"), ["ada-lovelace"])


if __name__ == "__main__":
    unittest.main()
