"""Send rates per receiver: the pure rules, the Redis-shared pacer, MX lookups and its gauges."""
