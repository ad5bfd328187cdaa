from stats import summary


def line(values):
    s = summary(values)
    return f"{s['count']} values, mean {s['mean']:.1f} (min {s['min']}, max {s['max']})"
