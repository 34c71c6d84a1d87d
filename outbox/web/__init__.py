"""``outbox web``: the one-click unsubscribe endpoint and the providers' webhooks over HTTP."""
