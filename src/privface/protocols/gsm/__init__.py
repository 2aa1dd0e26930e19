"""Game-Set-MATCH (seed 004): biometric matching with a mobile device, a terminal and a service provider."""
