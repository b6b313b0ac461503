#!/bin/sh
# Print the text of a PDF's pages (an example a skill ships; never run by the tests).
pdftotext "$1" -
