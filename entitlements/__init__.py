"""Entry points: the CLI and the KCL child process. They build the settings and compose the parts."""

__all__: list[str] = []
