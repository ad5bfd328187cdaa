"""Parse durations such as '90s', '5m' or '2h' into seconds."""

UNITS = {"s": 1, "m": 60, "h": 3600}


def parse_duration(text):
    """Seconds in text: a number and a unit (s, m or h)."""
    text = text.strip()
    if not text or text[-1] not in UNITS:
        raise ValueError(f"bad duration {text!r}: want a number and a unit (s, m, h)")
    return int(text[:-1]) * UNITS[text[-1]]
