"""CLI: the Click app. Only parses, calls tvmc.driver and prints (Rich on a terminal, JSON on demand).

In: tvmc.driver (and errors). Out: `cli` (the group), `main` (the console script).
"""
