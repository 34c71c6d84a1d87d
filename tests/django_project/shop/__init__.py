"""A shop's app in the test project: the ``Order`` the Django example of the README creates."""
