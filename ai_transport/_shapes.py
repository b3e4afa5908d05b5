"""Shape checks shared by the hot paths (private).

``isinstance(x, Mapping)`` goes through the ABC machinery (~80 ns); a tuple whose first member is
``dict`` answers a plain dict with one exact-type check (~13 ns) and anything else as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

#: ``isinstance(x, MAPPING)`` is ``isinstance(x, Mapping)``, fast for plain dicts.
MAPPING: Final = (dict, Mapping)
