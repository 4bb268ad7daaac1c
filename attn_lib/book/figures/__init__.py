"""The book's figures: one module per chapter (named by its stem), one function per figure.

Each function computes what it draws through the cached studies and returns an
:class:`attn_lib.book.page.Figure` with the numbers that the chapter's prose quotes. Modules are
not imported eagerly (they import matplotlib): ``from attn_lib.book.figures import phase_diagram``.
"""
