"""Small helpers for lists of lines."""


def head(lines, n):
    """The first n lines."""
    return lines[:n]


def tail(lines, n):
    """The last n lines."""
    return lines[len(lines) - n + 1:]
