"""Sweeps over the number of envs: the driver that runs each point in its own process
(:mod:`.runner`), the point's worker (:mod:`.worker`), the sweep manifest and its reader
(:mod:`.record`), the knee of the throughput curve (:mod:`.knee`) and the one out-of-memory check
(:mod:`.oom`)."""
