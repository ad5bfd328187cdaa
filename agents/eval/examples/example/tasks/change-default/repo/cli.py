"""python3 cli.py URL [--timeout SECONDS]: print a page."""
import argparse
import sys

from fetch import fetch


def parser():
    p = argparse.ArgumentParser(description="Print a page.")
    p.add_argument("url")
    p.add_argument("--timeout", type=float, default=30, help="seconds before giving up (default 30)")
    return p


def main(argv=None):
    args = parser().parse_args(argv)
    sys.stdout.write(fetch(args.url, args.timeout).decode())
    return 0


if __name__ == "__main__":
    sys.exit(main())
