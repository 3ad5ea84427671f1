"""What a cache's counters say."""


def hit_rate(cache):
    """The share of gets that found their key (0.0 before any get)."""
    total = cache.hits + cache.misses
    if total == 0:
        return 0.0
    return cache.hits / total


def describe(cache):
    """One line: fill, capacity and counters."""
    return f"{len(cache)}/{cache.capacity} keys, {cache.hits} hits, {cache.misses} misses"
