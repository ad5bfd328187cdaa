from duration import parse_duration


def every(spec):
    """A schedule that runs every spec ('5m', '1h', ...)."""
    return {"interval": parse_duration(spec)}
