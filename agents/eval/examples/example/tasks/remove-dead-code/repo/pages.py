from textutil import slugify, words


def page_path(title):
    return f"/pages/{slugify(title)}.html"


def word_count(text):
    return len(words(text))
