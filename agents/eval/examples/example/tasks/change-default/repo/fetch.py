"""Fetching pages, with a timeout."""
import urllib.request

DEFAULT_TIMEOUT = 30


def fetch(url, timeout=30):
    """The body of url; gives up after timeout seconds."""
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()
