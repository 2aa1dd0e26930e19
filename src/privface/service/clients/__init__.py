"""The client side of each protocol over HTTP: one class per protocol (``<name>.py``) that runs the protocol's client
party against a ``privface serve`` over ``service.client.ServiceClient``. ``privface.<Name>Client`` exports them."""
