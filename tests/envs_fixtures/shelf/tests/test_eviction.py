import unittest

from shelf import FIFOCache, LRUCache
from tests import CacheContract


class LRUBehaviour(CacheContract, unittest.TestCase):
    cache_class = LRUCache

    def test_evicts_the_least_recently_used(self):
        cache = LRUCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.get("a")
        cache.put("c", 3)
        self.assertEqual(cache.keys(), ["a", "c"])


class FIFOBehaviour(CacheContract, unittest.TestCase):
    cache_class = FIFOCache

    def test_evicts_the_oldest_insert(self):
        cache = FIFOCache(2)
        cache.put("a", 1)
        cache.put("b", 2)
        cache.get("a")
        cache.put("c", 3)
        self.assertEqual(cache.keys(), ["b", "c"])
