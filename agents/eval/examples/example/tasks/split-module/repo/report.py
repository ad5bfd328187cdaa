from geometry import format_polygon, polygon_perimeter


def describe(points):
    return f"{format_polygon(points)}: perimeter {polygon_perimeter(points):.2f}"
