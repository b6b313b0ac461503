from mcp_hub.launch import main

main()
