"""The fast-path emitter: every pass of ``generator/fast`` composed into one object.

Each pass is a mixin of its own module; they share one state (``base``) and call each
other through ``self``, so a pass is read and changed in its own file:

- ``base``: the family's constants, the per-record state, type and size queries
- ``runs``: fixed-run fusion (one ``struct`` read or write per run of fixed fields)
- ``inline``: switch and sub-record inlining at the call sites
- ``checksums``, ``compression``: checked and patched checksums, compressed sections
- ``decoders``, ``encoders``: the checked ``_d_`` decoder and ``_e_`` encoder of a layout
- ``twins`` (with ``optimist``, ``facts``, ``read_fusion``, ``rows``): the optimistic
  ``_u_``/``_m_`` decoders and the ``_r_`` rows loops, rewritten from the checked
  decoders' syntax trees (``facts``: the work the decoder's own fields prove moot)
- ``many`` (with ``pack_fusion``): the ``_em_`` many-record encoders

The rewriting passes walk each emitted function a fixed number of times, each
statement list once per pass: the generator's time grows with the size of its output.
"""

from __future__ import annotations

from .base import EmitterBase
from .checksums import Checksums
from .compression import Compression
from .decoders import Decoders
from .encoders import Encoders
from .inline import Inlining
from .many import ManyEncoders
from .runs import FixedRuns
from .twins import Twins


class FastEmitter(Decoders, Encoders, Twins, ManyEncoders, Inlining, Checksums, Compression,
                  FixedRuns, EmitterBase):
    """Emit decoder and encoder source for every record layout of one family."""
