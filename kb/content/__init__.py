"""Files to text: formats, notes and frontmatter, chunking, redaction."""
