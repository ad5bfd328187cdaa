"""Small numeric helpers."""


def lerp(a, b, t):
    """The value a fraction t of the way from a to b.

    >>> lerp(0, 10, 0.5)
    5.0
    """
    return a + (b - a) * t
