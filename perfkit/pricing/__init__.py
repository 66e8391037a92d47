"""What a finding costs: the cost model that prices syncs, copies, allocations and loops per step
(:mod:`.cost`) from a machine's measured profile (:mod:`.machine_profile`, the probes' numbers)."""
