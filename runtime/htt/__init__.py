"""HTT (.htt) store runtime: replay, recovery, compaction, locking, history (issue 4).

Entry point: :class:`bytewright.runtime.htt.store.Store`.
"""
