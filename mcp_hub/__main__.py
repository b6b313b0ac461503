from mcp_hub.cli import main

main()
