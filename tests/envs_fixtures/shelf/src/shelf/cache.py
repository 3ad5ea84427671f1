"""Bounded caches: a dict in insertion order, trimmed from the front when full."""


class BoundedCache:
    """Holds at most `capacity` keys; subclasses choose which key goes when it is full."""

    def __init__(self, capacity):
        if capacity < 1:
            raise ValueError("capacity must be at least 1")
        self.capacity = capacity
        self._data = {}
        self.hits = 0
        self.misses = 0

    def __len__(self):
        return len(self._data)

    def __contains__(self, key):
        return key in self._data

    def get(self, key, default=None):
        """The value stored under `key`, or `default`; counts a hit or a miss."""
        if key in self._data:
            self.hits += 1
            self._touch(key)
            return self._data[key]
        self.misses += 1
        return default

    def put(self, key, value):
        """Stores `value` under `key`, evicting one key first when the cache is full."""
        if key in self._data:
            self._data[key] = value
            self._touch(key)
            return
        if len(self._data) >= self.capacity:
            self._evict()
        self._data[key] = value

    def keys(self):
        """The keys in eviction order: the next one to go first."""
        return list(self._data)

    def _touch(self, key):
        pass

    def _evict(self):
        oldest = next(iter(self._data))
        del self._data[oldest]


class LRUCache(BoundedCache):
    """Evicts the key used least recently (a get or a put counts as a use)."""

    def _touch(self, key):
        self._data[key] = self._data.pop(key)


class FIFOCache(BoundedCache):
    """Evicts the key inserted first, however often it was used."""
