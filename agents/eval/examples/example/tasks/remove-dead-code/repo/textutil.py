"""Text helpers."""
import re


def slugify(title):
    """'Hello, World!' -> 'hello-world'."""
    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")


def old_slugify(title):
    # Replaced by slugify; kept until the importer moved over.
    return title.lower().replace(" ", "_")


def _legacy_split(text):
    return [w for w in text.split(" ") if w]


def words(text):
    return text.split()
