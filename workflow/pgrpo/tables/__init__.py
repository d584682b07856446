"""Every table and text view of the workflow: one writer for Markdown, LaTeX and HTML tables (:mod:`.render`), and
one module per stage's views (:mod:`.table1`, :mod:`.fits`, :mod:`.bandit`, :mod:`.symbolic`, :mod:`.prediction`).
"""
