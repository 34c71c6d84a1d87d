"""From a template to the bytes sent, in this order: compile (once per template version), render
(per message), build (headers and MIME), sign (DKIM).
"""
