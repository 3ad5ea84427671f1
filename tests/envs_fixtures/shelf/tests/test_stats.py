import unittest

from shelf import LRUCache
from shelf.stats import describe, hit_rate


class HitRateChecks(unittest.TestCase):
    def test_no_gets_means_zero(self):
        self.assertEqual(hit_rate(LRUCache(1)), 0.0)

    def test_half_of_the_gets_hit(self):
        cache = LRUCache(2)
        cache.put(1, "x")
        cache.get(1)
        cache.get(1)
        cache.get(2)
        cache.get(3)
        self.assertEqual(hit_rate(cache), 0.5)

    def test_describe(self):
        cache = LRUCache(3)
        cache.put(1, 1)
        cache.get(2)
        self.assertEqual(describe(cache), "1/3 keys, 0 hits, 1 misses")
