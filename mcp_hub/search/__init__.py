"""Tool search: a client of a hub with a big catalog lists a search tool and a call tool instead of every tool.

- ranking.py: the words of a tool and of a request, BM25 over them, embedding rankers when wordllama or the
  sentence model is installed, and their fusion (`Ranker`); lexicon.py: everyday words read as the tools'
  words; model.py: the sentence model (the `search-model` extra).
- index.py: a catalog view's tools ranked for a request, rebuilt once per catalog revision (`ToolIndex`).
- tools.py: the search and call tools as the client sees them, and what answers them (`ToolSearch`).
"""

from mcp_hub.search.index import ToolIndex
from mcp_hub.search.ranking import Ranker, embedding_available
from mcp_hub.search.tools import ToolSearch

__all__ = ["Ranker", "ToolIndex", "ToolSearch", "embedding_available"]
