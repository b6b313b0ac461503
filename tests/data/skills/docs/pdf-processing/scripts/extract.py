"""Print the first bytes of a PDF (an example a skill ships; never run by the tests)."""

import sys

with open(sys.argv[1], "rb") as pdf:
    print(pdf.read()[:100])
