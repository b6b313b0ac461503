from mcp_hub.entry import main

main()
