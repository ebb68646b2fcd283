"""CLI: the Click app. Only parses, calls tvmc.driver and prints (Rich or JSON).

In: tvmc.driver (and errors). Out: `cli` (the group), `main` (the console script).
"""
