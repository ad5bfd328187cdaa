"""Points and shapes, and how to show them."""
import math


def distance(a, b):
    return math.hypot(b[0] - a[0], b[1] - a[1])


def polygon_perimeter(points):
    return sum(distance(points[i], points[(i + 1) % len(points)]) for i in range(len(points)))


def format_point(p):
    return f"({p[0]:g}, {p[1]:g})"


def format_polygon(points):
    return " -> ".join(format_point(p) for p in points)
