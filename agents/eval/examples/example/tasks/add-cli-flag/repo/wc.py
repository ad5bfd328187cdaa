"""Count the words in files: python3 wc.py FILE..."""
import argparse
import sys


def count_words(text):
    return len(text.split())


def main(argv=None):
    p = argparse.ArgumentParser(description="Count the words in files.")
    p.add_argument("files", nargs="+")
    args = p.parse_args(argv)
    for name in args.files:
        with open(name) as f:
            print(f"{count_words(f.read())} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
