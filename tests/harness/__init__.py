"""Set-ups that several test files share, one concept a module, so that a test file says what it tests and not how
to start what it tests against.

`tests/conftest.py` has the basics every file uses (a hub from a config, its endpoint served on loopback, a client,
the fixture server as a stdio child); the modules here build on them:

- `wire`: requests written by hand as a client puts them on the wire, and reading what came back;
- `people`: scripted people answering the questions servers ask through the hub;
- `console`: the admin console's hub, its keys, and logging in to it;
- `cached`: a hub with caching on, and what its audit says about the cache;
- `everything`: npm's server-everything over HTTP, and a client's scripted answers to it;
- `telemetry`: the spans the hub emits, caught in memory;
- `tasks`: calling a tool as a task and following it to its end;
- `identity`: people signing in through the hub to a user mount, and the tokens the upstream saw;
- `oauth`: the hub as an OAuth resource server, and reading its challenges;
- `cluster`: hub replicas sharing one Redis;
- `processes`: whether a process the hub started is alive, and which a server runs as;
- `cli`: the `mcp-hub` command as a user runs it (forked: see `hub_command` in conftest).
"""
