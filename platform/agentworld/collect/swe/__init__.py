"""The swe domain: a small generated Python repository with a planted bug, its tests
run for real in the episode's sandboxed shell.

  env.py        the recorder (SweEnvironment) and its tools
  playbooks.py  the generated repositories and the scripted developer
"""
