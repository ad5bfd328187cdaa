"""Show the end of a text."""
import sys

from textlines import tail


def last_lines(text, n=3):
    return "\n".join(tail(text.splitlines(), n))


if __name__ == "__main__":
    print(last_lines(sys.stdin.read(), int(sys.argv[1]) if len(sys.argv) > 1 else 3))
