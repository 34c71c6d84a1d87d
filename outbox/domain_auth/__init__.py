"""A sending domain's authentication as receivers see it: SPF, DKIM, DMARC,
MTA-STS, TLS-RPT and the bounce domain's MX (``outbox domain check``).

The judging modules are pure: records in, :class:`~outbox.domain_auth.findings.Finding`
out. :mod:`~outbox.domain_auth.dns_lookups` asks DNS and fetches the MTA-STS
policy; :mod:`~outbox.domain_auth.checker` runs one against the other.
"""
