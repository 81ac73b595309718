"""One ingest run: prepare, plan, embed, write, hand over; deletes by hand."""
