"""The contract every cache keeps; test classes mix it in and set `cache_class`."""


class CacheContract:
    cache_class = None

    def make(self, capacity=2):
        return self.cache_class(capacity)

    def test_get_returns_what_was_put(self):
        cache = self.make()
        cache.put("a", 1)
        self.assertEqual(cache.get("a"), 1)

    def test_missing_key_gives_the_default(self):
        self.assertEqual(self.make().get("zz", 7), 7)

    def test_length_never_exceeds_capacity(self):
        cache = self.make(2)
        for i in range(5):
            cache.put(i, i * i)
        self.assertEqual(len(cache), 2)

    def test_put_overwrites(self):
        cache = self.make()
        cache.put("a", 1)
        cache.put("a", 2)
        self.assertEqual((len(cache), cache.get("a")), (1, 2))

    def test_rejects_zero_capacity(self):
        with self.assertRaises(ValueError):
            self.cache_class(0)

    def test_counts_hits_and_misses(self):
        cache = self.make()
        cache.put("a", 1)
        cache.get("a")
        cache.get("b")
        self.assertEqual((cache.hits, cache.misses), (1, 1))
