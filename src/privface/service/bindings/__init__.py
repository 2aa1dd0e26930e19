"""The server side of each protocol over HTTP: one ``ProtocolService`` per protocol (``<name>.py``), mounted by
``service.registry`` by name. Each decodes and validates one wire message per step and drives the protocol's parties;
the parties themselves (``privface.protocols.<name>``) hold no HTTP code."""
