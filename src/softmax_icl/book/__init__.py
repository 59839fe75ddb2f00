"""The book machinery: records, verdicts, pages, chapters, the command line; it imports the science, never the
figures (their registry is handed to it: :mod:`softmax_icl.figures`)."""
