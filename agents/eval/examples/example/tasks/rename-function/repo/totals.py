from records import parse_line, parse_lines


def total(lines):
    return sum(amount for _, amount in parse_lines(lines))


def first_name(line):
    return parse_line(line)[0]
