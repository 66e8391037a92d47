"""Profiling one run: the live session that owns the collectors (:mod:`.session`), the plain snapshot
it leaves and the pure build of the run record from it (:mod:`.snapshot`), and running a user's
script or module under a session as ``python`` would (:mod:`.runner`)."""
