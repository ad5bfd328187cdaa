"""Reading the records of a "name,amount" log."""


def parse_line(line):
    """Split one "name,amount" line into (name, amount)."""
    name, amount = line.split(",")
    return name.strip(), int(amount)


def parse_lines(lines):
    """The records of the non-blank lines."""
    return [parse_line(line) for line in lines if line.strip()]
