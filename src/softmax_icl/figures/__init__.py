"""One folder per figure of the book: its parameters, computation, claims and plots (see :mod:`softmax_icl.book.registry`)."""
