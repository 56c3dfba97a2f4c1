import unittest

from stats import mean, spread


class StatsTest(unittest.TestCase):
    def test_mean(self) -> None:
        assert mean([2, 4, 6]) == 4
        assert mean([5]) == 5

    def test_spread(self) -> None:
        assert spread([3, 9, 1]) == 8


if __name__ == "__main__":
    unittest.main()
