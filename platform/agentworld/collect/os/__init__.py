"""The os domain: a Linux desktop per episode (Xvfb, Openbox and a GTK application) in
the collectors' sandbox, read through its accessibility bus and driven with real X
input.

  env.py          the recorder (OsEnvironment): actions in, observations out
  playbooks.py    editor, calculator, spreadsheet, file manager and settings tasks
  checks.py       the end states those tasks are checked by (files, settings, display)
  session.py      the sandboxed desktop of one episode, from the host's side
  driver.py       inside the sandbox: the X server, buses, window manager, the actions
  accessibility.py  inside: the AT-SPI tree of the windows on screen, element ids
  tree_text.py    the tree as the agent reads it ([id] role "name", states, value)
  screenshot.py   inside: the frame buffer as a PNG
  actions.py      the action space (click(12), type("hi"), hotkey("ctrl", "s"), ...)

driver.py, accessibility.py, tree_text.py, screenshot.py and actions.py import nothing
of agentworld: they run on the system Python inside the sandbox, where only this folder
is visible.
"""
