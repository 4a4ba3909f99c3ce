"""What the coordinators over internal topics share (the group coordinator over
`__consumer_offsets`, the transaction coordinator over `__transaction_state`):
`shards.py`, the table of the partitions this broker leads and their loading."""
