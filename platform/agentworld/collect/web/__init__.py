"""The web domain: real web applications (Datasette over generated SQLite databases,
a form-driven helpdesk app) served on the sandbox's loopback and visited by a headless
Chromium that Playwright drives.

  env.py       the recorder (WebEnvironment): actions in, observations out
  playbooks.py tasks on Datasette and the helpdesk, read from each page's tree
  session.py   the sandboxed driver process, from the host's side
  driver.py    inside the sandbox: the applications, the browser, each action
  axtree.py    the accessibility tree as the agent reads it ([bid] role "name")
  actions.py   the browser action space (click('12'), fill('31', 'x'), ...)
  sites.py     the episode's databases and tickets, drawn from its RNG
  helpdesk.py  the helpdesk application (standard library only)

driver.py, axtree.py, actions.py and helpdesk.py import nothing of agentworld: only
this folder is visible inside the sandbox.
"""
