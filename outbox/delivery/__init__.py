"""Sending claimed rows: orchestration (:mod:`~outbox.delivery.deliver`) over the pure rules that
classify a reply and schedule a retry.
"""
