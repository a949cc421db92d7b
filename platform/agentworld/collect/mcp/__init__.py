"""The mcp domain: real MCP servers from PyPI (mcp-server-time, mcp-server-git), run
sandboxed and spoken to over stdio.

  env.py        the recorder (McpEnvironment) and the server client (McpServer)
  playbooks.py  time-zone questions and repository chores, with argument mistakes
"""
