# The compiled cffi module (out-of-line API mode); see _cdef.h for what lib holds.
from typing import Any

ffi: Any
lib: Any
