"""Splitting results into pages."""


def page(items, number, per_page=10):
    """The items on page number (pages count from 1)."""
    start = (number - 1) * per_page
    return items[start:start + per_page]
