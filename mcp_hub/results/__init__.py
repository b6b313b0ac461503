"""Results sized for the model: a result over its token budget reaches the client cut to fit, with a note of
what was cut and links to the whole, which the hub keeps for the principal that received it (docs/results.md).

```
tokens.py   counting tokens: o200k_base (bpe-openai, its vocabulary in the wheel), else bytes / 4
budget.py   which budget applies to a call (a rule's, else the endpoint's and profile's smaller, else the hub's)
shaping.py  a result cut to a budget: heads of text, structure kept, images downscaled or linked (pure)
kept.py     KeptResults: the whole of cut results in the cache store, per principal, read page by page
listing.py  tool lists within a budget: `max_list_tokens`, descriptions shortened until a tools/list fits
```

The chain link that applies them is chain/results.py; the endpoint answers `hub://results/ID` reads and the
`read_result` tool (server/endpoint.py); the tools lists (server/listing.py) apply listing.py.
"""

from mcp_hub.results.budget import result_budget
from mcp_hub.results.kept import KeptResults, NotKept, Page
from mcp_hub.results.shaping import Shaped, shape
from mcp_hub.results.tokens import Tokens, tokens

__all__ = ["KeptResults", "NotKept", "Page", "Shaped", "Tokens", "result_budget", "shape", "tokens"]
