from pager import page


def listing(items, number, per_page=10):
    return {"page": number, "items": page(items, number, per_page)}
