"""The local stack: moto on loopback, the TTL emulator, the fake Array server and the workload simulator."""

__all__: list[str] = []
