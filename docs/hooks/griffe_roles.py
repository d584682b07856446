"""Griffe extension for the API reference: the docstrings of ``workflow/pgrpo`` use Sphinx roles
(``:func:`simulate```, ``:mod:`.exact```); Markdown has none, so each becomes a code span of its target."""

from __future__ import annotations

import re
from typing import Any

import griffe

ROLE = re.compile(r":(?:mod|func|class|data|attr|meth|obj|exc|const):`~?([^`]+)`")


class SphinxRoles(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None and ":" in obj.docstring.value:
            obj.docstring.value = ROLE.sub(r"`\1`", obj.docstring.value)
