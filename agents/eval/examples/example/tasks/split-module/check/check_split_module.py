import ast
import pathlib
import unittest


class SplitCheck(unittest.TestCase):
    def test_formatting_module(self):
        import formatting

        self.assertEqual(formatting.format_point((1, 2.5)), "(1, 2.5)")
        self.assertEqual(formatting.format_polygon([(0, 0), (1, 0)]), "(0, 0) -> (1, 0)")

    def test_geometry_keeps_only_the_maths(self):
        import geometry

        self.assertEqual(geometry.distance((0, 0), (3, 4)), 5)
        self.assertEqual(geometry.polygon_perimeter([(0, 0), (1, 0), (1, 1), (0, 1)]), 4)
        for name in ("format_point", "format_polygon"):
            self.assertFalse(hasattr(geometry, name), f"geometry still has {name}")

    def test_report_imports_the_new_module(self):
        import report

        self.assertEqual(report.describe([(0, 0), (3, 0), (3, 4)]), "(0, 0) -> (3, 0) -> (3, 4): perimeter 12.00")
        tree = ast.parse(pathlib.Path("report.py").read_text())
        modules = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        self.assertIn("formatting", modules)
