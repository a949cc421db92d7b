"""The terminal domain: a real bash on a pseudo-terminal, in a throw-away sandboxed
home; actions are command lines, observations what the terminal shows next.

  env.py        the recorder (TerminalEnvironment)
  playbooks.py  file chores, text processing, git, scripting, with everyday mistakes
"""
