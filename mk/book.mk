# Book targets, included by the top-level Makefile (which defines STAMP and PY).
#   make book [PROFILE=full|quick]          execute the chapters whose notebook, parameters or
#                                           attn_lib changed (all, the first time), then build _build/html
#   make chapter NAME=<stem> [PROFILE=...]  re-execute that chapter (and any stale one), then the HTML
#   make clean                              remove _build and _executed (not the result cache)
# The logic lives in scripts/build_book.py (see its docstring for the layout).
PROFILE ?= full
NAME ?=
BOOK_CACHE = $(or $(ATTN_BOOK_CACHE),$(CURDIR)/.cache/attn-book)

.PHONY: book chapter clean browser

book: $(STAMP)
	$(PY) scripts/build_book.py --profile $(PROFILE)

chapter: $(STAMP)
	@test -n "$(NAME)" || { echo "usage: make chapter NAME=<stem> [PROFILE=full|quick]; stems:"; \
	  ls book/*.ipynb | sed -E 's|book/[0-9]+_||; s|\.ipynb$$||; s|^|  |'; exit 2; }
	$(PY) scripts/build_book.py --profile $(PROFILE) --chapter $(NAME)

clean:
	rm -rf _build _executed
	@echo "Removed _build and _executed (the executed notebooks)."
	@echo "The Monte Carlo result cache is kept in $(BOOK_CACHE) (ATTN_BOOK_CACHE overrides it);"
	@echo "clear it with: rm -rf $(BOOK_CACHE)"

# Headless Chromium for tests/test_book_html.py; installed with apt-get only when missing.
browser:
	@bash scripts/ensure_chromium.sh

# `make test` checks the rendered book in a browser: make sure one is there first.
test: browser
