"""User accounts."""


def user_key(name):
    return " ".join(name.split()).lower().replace(" ", "-")


def same_user(a, b):
    return user_key(a) == user_key(b)
