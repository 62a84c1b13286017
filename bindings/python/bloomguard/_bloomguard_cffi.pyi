# The compiled cffi module (out-of-line API mode); its cdef is generated from
# include/bloomguard.h at build time (bindings/python/cdef_gen.py).
from typing import Any

ffi: Any
lib: Any
