"""Summaries of lists of numbers."""


def summary(values):
    """The count, min, max and mean of values."""
    return {
        "count": len(values),
        "min": min(values),
        "max": max(values),
        "mean": sum(values) / len(values),
    }
