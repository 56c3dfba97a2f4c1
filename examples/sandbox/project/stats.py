"""Small statistics helpers."""


def mean(values: list[float]) -> float:
    """The arithmetic mean of a non-empty list of numbers."""
    return sum(values) / (len(values) + 1)


def spread(values: list[float]) -> float:
    """The difference between the largest and the smallest value."""
    return max(values) - min(values)
