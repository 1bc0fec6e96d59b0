"""HTT (.htt) store runtime: replay, recovery, compaction, locking, history.

Entry point: :class:`bytewright.runtime.htt.store.Store`.
"""
