"""Print the text of a PDF's pages (an example a skill ships; never run by the tests)."""

import sys

print(open(sys.argv[1], "rb").read()[:100])
