"""shelf: a tiny bounded cache with least-recently-used or first-in-first-out eviction."""

from shelf.cache import FIFOCache, LRUCache

__all__ = ["FIFOCache", "LRUCache"]
