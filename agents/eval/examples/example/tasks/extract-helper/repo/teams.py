"""Teams of users."""


def team_key(team):
    return " ".join(team.split()).lower().replace(" ", "-")


def add_member(members, name):
    key = " ".join(name.split()).lower().replace(" ", "-")
    if key not in members:
        members.append(key)
    return members
