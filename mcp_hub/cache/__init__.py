"""Results the hub keeps and serves again: `resources/read` as their servers' cache hints allow, and
`tools/call` of read-only tools where the policy opts in (the chain's cache link, chain/cache.py).

```
store.py    CacheStore (the interface a shared store implements too) and MemoryStore (cachetools)
keys.py     what a key is made of, arguments in canonical form
results.py  ResultCache: lookups, single flight, invalidation
```
"""

from mcp_hub.cache.results import Keep, Lookup, ResultCache, Served, scopes_of
from mcp_hub.cache.store import CacheStore, MemoryStore, Stored

__all__ = ["CacheStore", "Keep", "Lookup", "MemoryStore", "ResultCache", "Served", "Stored", "scopes_of"]
