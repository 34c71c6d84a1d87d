"""The relay: claims due rows in Postgres and publishes them to the broker, high priority first;
sweeps abandoned rows.
"""
