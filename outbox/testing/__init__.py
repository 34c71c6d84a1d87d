"""Test and demo support shipped with the package: a recording SMTP server, the Procfile processes
as children, the demo.
"""
