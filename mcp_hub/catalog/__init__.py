"""What the hub offers: the merged listing of every mount, public names and URIs, pinned tools, the snapshot
kept across restarts."""
