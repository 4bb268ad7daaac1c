"""The book's support: the plotting style, the page helpers and the figures.

``style``
    The book's plotting style and plotting primitives.
``claims``
    Checked findings: a sentence's verdict, evidence and wording (:mod:`~attn_lib.book.claims`).
``page``
    What a chapter notebook calls: :func:`~attn_lib.book.page.setup`,
    :func:`~attn_lib.book.page.show` (a figure and its numbers) and
    :func:`~attn_lib.book.page.glue`.
``figures``
    One module per chapter, one function per figure.
``explorer``
    The theory explorer: a standalone Bokeh page over a precomputed grid of curves.
``against``
    Theory against simulation of any setting over ``gamma``, with ridge beside it, in one call
    (:func:`~attn_lib.book.against.theory_vs_simulation`).

Nothing is imported eagerly: ``style``, ``page`` and ``figures`` import matplotlib, ``explorer``
imports Bokeh.
"""
